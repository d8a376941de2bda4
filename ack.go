package imv2

import (
	"time"
	"unicode/utf8"

	"github.com/xagentkit/imv2/internal/wiretext"
)

// AckStatus is chat.message.ack status (A3).
type AckStatus string

// The three ack statuses of A3. Accepted and Duplicate are terminal success
// (S1); Rejected is terminal only when not retryable (S3).
const (
	AckAccepted  AckStatus = "accepted"
	AckDuplicate AckStatus = "duplicate"
	AckRejected  AckStatus = "rejected"
)

// ChatMessageAck is the payload of a chat.message.ack. It says only whether
// the receiver took the message, never that the agent ran or the target
// replied (A4). Build acks with NewAck: it copies reply_to, the channel and
// message_id from the acknowledged packet, so they cannot disagree (A1, A2).
type ChatMessageAck struct {
	MessageID string    `json:"message_id"`
	Status    AckStatus `json:"status"`
	// Code, Message and Retryable are set on rejections only (A3).
	Code      Code   `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	Retryable bool   `json:"-"`
}

// ackWire tells an absent retryable from false.
type ackWire struct {
	MessageID string    `json:"message_id"`
	Status    AckStatus `json:"status"`
	Code      Code      `json:"code,omitempty"`
	Message   string    `json:"message,omitempty"`
	Retryable *bool     `json:"retryable,omitempty"`
}

func (a *ChatMessageAck) wire() ackWire {
	w := ackWire{MessageID: a.MessageID, Status: a.Status, Code: a.Code, Message: a.Message}
	if a.Status == AckRejected {
		r := a.Retryable
		w.Retryable = &r
	}
	return w
}

// rejection returns a rejection as an *Error (Code, Message, Retryable), or nil
// for accepted and duplicate.
func (a *ChatMessageAck) rejection() *Error {
	if a.Status != AckRejected {
		return nil
	}
	return &Error{Code: a.Code, Message: a.Message, Retryable: a.Retryable}
}

// Validate checks A3: a known status; a rejection with a non-empty code.
// (Whether retryable was present is checked by DecodeChatMessageAck.)
func (a *ChatMessageAck) Validate() error {
	if err := checkID("chat.message.ack: message_id", a.MessageID); err != nil {
		return err
	}
	switch a.Status {
	case AckAccepted, AckDuplicate:
	case AckRejected:
		if a.Code == "" {
			return Errorf(CodeInvalidPacket, "chat.message.ack: a rejection needs a code (A3)")
		}
		if len(a.Code) > MaxIDBytes {
			return Errorf(CodeInvalidPacket, "chat.message.ack: code is over %d bytes", MaxIDBytes)
		}
	default:
		return Errorf(CodeInvalidPacket, "chat.message.ack: status %q is not accepted, duplicate or rejected (A3)", a.Status)
	}
	if len(a.Message) > maxAckMessageBytes || !utf8.ValidString(a.Message) {
		return Errorf(CodeInvalidPacket, "chat.message.ack: message is over %d bytes or not UTF-8", maxAckMessageBytes)
	}
	return nil
}

// DecodeChatMessageAck decodes and validates a chat.message.ack: reply_to
// must be set (A1), the channel too (I1), and a rejection carries a code and
// a boolean retryable (A3). A code over MaxIDBytes or a message over 1,024
// bytes is cut, not refused (A3: the profile sets no size).
func DecodeChatMessageAck(p *Packet) (*ChatMessageAck, error) {
	if p.Type != TypeChatMessageAck {
		return nil, Errorf(CodeInvalidPacket, "packet type is %q, not %s", p.Type, TypeChatMessageAck)
	}
	if err := checkRoute(p); err != nil {
		return nil, err
	}
	if p.ReplyTo == "" {
		return nil, Errorf(CodeInvalidPacket, "chat.message.ack: reply_to is required (A1)")
	}
	w := takeDecoded[ackWire](p)
	if w == nil {
		var ok bool
		if w, ok = decodeAckFast(p.Payload); !ok {
			w = new(ackWire)
			if err := decodeIMPayload(p, w); err != nil {
				return nil, err
			}
		}
	}
	// Profile §7 asks for a "short" message and a stable code and sets no size:
	// a longer one is cut on read, never a reason to drop the ack, whose
	// status is what the sender acts on (A3). Writers stay within the
	// limits (Validate).
	a := &ChatMessageAck{MessageID: w.MessageID, Status: w.Status, Code: readableCode(w.Code), Message: sendableText(w.Message)}
	// retryable means something on a rejection only; elsewhere it is
	// ignored, so an accepted ack never decodes as "retryable".
	if w.Status == AckRejected {
		if w.Retryable == nil {
			return nil, Errorf(CodeInvalidPacket, "chat.message.ack: a rejection needs a boolean retryable (A3)")
		}
		a.Retryable = *w.Retryable
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return a, nil
}

// NewAck returns the chat.message.ack answering orig, a chat.message packet
// whose payload has message_id messageID. reply_to is orig's packet_id (A1),
// the channel and message_id are orig's (A2). For AckRejected, rej gives
// the code, message and retryable (A3, A8); it is ignored otherwise.
//
// Use AckFor when you do not hold the decoded message.
func NewAck(orig *Packet, messageID string, status AckStatus, rej *Error) (*Packet, error) {
	p := new(Packet)
	if err := newAckInto(p, nil, orig, messageID, status, rej); err != nil {
		return nil, err
	}
	return p, nil
}

// newAckInto is NewAck writing the ack into dst, its payload appended to
// buf[:0] (a delivery holds the packet of its ack and room for the
// payload: two allocations fewer per message).
func newAckInto(dst *Packet, buf []byte, orig *Packet, messageID string, status AckStatus, rej *Error) error {
	if orig == nil || orig.Type != TypeChatMessage {
		return Errorf(CodeInvalidPacket, "chat.message.ack: acknowledges chat.message packets only")
	}
	if orig.PacketID == "" {
		return Errorf(CodeInvalidPacket, "chat.message.ack: the original has no packet_id")
	}
	a := ChatMessageAck{MessageID: messageID, Status: status}
	if status == AckRejected {
		if rej == nil {
			return Errorf(CodeInvalidPacket, "chat.message.ack: a rejection needs an *Error")
		}
		a.Code, a.Message, a.Retryable = rej.Code, truncate(rej.Message, maxAckMessageBytes), rej.Retryable
	}
	if err := a.Validate(); err != nil {
		return err
	}
	if orig.ConnectorChannelID == "" {
		return Errorf(CodeChannelIDRequired, "chat.message.ack: the original has no connector_channel_id (I1)")
	}
	w := a.wire()
	if cap(buf) < ackSize(&w) {
		buf = make([]byte, 0, ackSize(&w))
	}
	raw, err := appendAck(buf[:0], &w)
	if err != nil {
		return Errorf(CodeInvalidPacket, "chat.message.ack: %s", jsonErrText(err))
	}
	// As NewResponse, without boxing the payload in an interface (one
	// allocation per ack).
	*dst = Packet{
		Schema:             PacketSchema,
		PacketID:           NewPacketID(),
		ConnectorChannelID: orig.ConnectorChannelID,
		Type:               TypeChatMessageAck,
		Time:               time.Now().UnixMilli(),
		Payload:            raw,
		ReplyTo:            orig.PacketID,
		RequestID:          orig.RequestID,
	}
	return nil
}

// ackable returns rej as an ack can carry it: a code that is no stable
// code (empty, over MaxIDBytes, not UTF-8) becomes target_rejected, or
// target_delivery_failed when retryable, and the message is made valid
// UTF-8 and cut to maxAckMessageBytes. A rejection's text is often a
// platform's (a GBK response body quoted into a Target's error): it must
// never stop the ack, whose absence turns a refusal into a resend loop.
func ackable(rej *Error) *Error {
	code := rej.Code
	if !stableCode(code) {
		code = CodeTargetRejected
		if rej.Retryable {
			code = CodeTargetDeliveryFailed
		}
	}
	msg := sendableText(rej.Message)
	if code == rej.Code && msg == rej.Message {
		return rej
	}
	return &Error{Code: code, Message: msg, Retryable: rej.Retryable, cause: rej.cause}
}

// stableCode reports whether c can travel as a code: 1 to MaxIDBytes
// bytes of UTF-8.
func stableCode(c Code) bool { return c != "" && len(c) <= MaxIDBytes && utf8.ValidString(string(c)) }

// readableCode returns a received code cut to MaxIDBytes on a rune
// boundary: the same code always reads the same.
func readableCode(c Code) Code {
	if len(c) <= MaxIDBytes {
		return c
	}
	return Code(truncate(wiretext.Valid(string(c)), MaxIDBytes))
}

// sendableText returns s made valid UTF-8 and cut to maxAckMessageBytes.
func sendableText(s string) string {
	return truncate(wiretext.Valid(s), maxAckMessageBytes) // valid first: U+FFFD is 3 bytes
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
