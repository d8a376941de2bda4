package imv2

import (
	"unicode/utf8"
)

// ChatMessageDelta is the payload of a chat.message.delta: one piece of
// assistant text, xAgent → Connector only (D1). Sequence starts at 1 for each
// message_id and rises by exactly 1 (D2). A delta never carries files (D7)
// and never completes a message (D6): only the final chat.message does.
type ChatMessageDelta struct {
	MessageID string `json:"message_id"`
	Sequence  int64  `json:"sequence"`
	Text      string `json:"text"`
}

// Validate checks D1, D2 (sequence ≥ 1) and D7 (a closed payload: text only).
func (d *ChatMessageDelta) Validate(dir Direction) error {
	if dir != ToConnector {
		return Errorf(CodeInvalidPacket, "chat.message.delta travels xAgent → Connector only (D1)")
	}
	if err := checkID("chat.message.delta: message_id", d.MessageID); err != nil {
		return err
	}
	if d.Sequence < 1 {
		return Errorf(CodeInvalidPacket, "chat.message.delta: sequence %d is below 1 (D2)", d.Sequence)
	}
	if len(d.Text) > MaxTextBytes {
		return Errorf(CodeInvalidPacket, "chat.message.delta: text is %d bytes, over %d", len(d.Text), MaxTextBytes)
	}
	if !utf8.ValidString(d.Text) {
		return Errorf(CodeInvalidPacket, "chat.message.delta: text is not valid UTF-8")
	}
	return nil
}

// DecodeChatMessageDelta decodes and validates a chat.message.delta. A
// `files` member is rejected (D7); other members the payload does not
// define are ignored (E5), unless a rule forbids their name.
func DecodeChatMessageDelta(p *Packet) (*ChatMessageDelta, error) {
	if p.Type != TypeChatMessageDelta {
		return nil, Errorf(CodeInvalidPacket, "packet type is %q, not %s", p.Type, TypeChatMessageDelta)
	}
	if err := checkRoute(p); err != nil {
		return nil, err
	}
	d := takeDecoded[ChatMessageDelta](p)
	if d == nil {
		var ok bool
		if d, ok = decodeDeltaFast(p.Payload); !ok {
			d = new(ChatMessageDelta)
			if err := decodeIMPayload(p, d); err != nil {
				return nil, err
			}
		}
	}
	if err := d.Validate(ToConnector); err != nil {
		return nil, err
	}
	return d, nil
}

// NewChatMessageDelta validates d and returns a delta packet for channel.
// Most callers use the xAgent Channel's stream helper, which numbers deltas.
func NewChatMessageDelta(channel string, d ChatMessageDelta) (*Packet, error) {
	if err := d.Validate(ToConnector); err != nil {
		return nil, err
	}
	if channel == "" {
		return nil, Errorf(CodeChannelIDRequired, "chat.message.delta: connector_channel_id is required (I1)")
	}
	raw, err := marshalDelta(&d)
	if err != nil {
		return nil, Errorf(CodeInvalidPacket, "chat.message.delta: %s", jsonErrText(err))
	}
	return NewPacket(TypeChatMessageDelta, channel, jsonRaw(raw))
}
