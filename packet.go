package imv2

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/xagentkit/imv2/internal/fastjson"
)

// Wire constants of the envelope and of this profile. The Common Protocol's
// own (subprotocol, version, control-plane packet types) are in package
// protocol.
const (
	// PacketSchema is the envelope's `schema` value (E1).
	PacketSchema = "xagent.connector.packet/v1"
	// ProfileIMv2 is the profile ID this SDK implements (P1).
	ProfileIMv2 = "xagent.im.v2"
	// TargetTypeIM is the only target type that may declare ProfileIMv2 (P1).
	TargetTypeIM = "im"
)

// Packet types of the IM Profile v2 (profile section 4).
const (
	TypeChatMessage      = "chat.message"
	TypeChatMessageDelta = "chat.message.delta"
	TypeChatMessageAck   = "chat.message.ack"
	TypeChatActivity     = "chat.activity"
)

// TypeError is the envelope type of an error packet (W10): the Channel
// answers a bad delta with one (D12).
const TypeError = "error"

// Packet is one envelope of the data plane (E1): one JSON object per
// WebSocket text frame. Payload stays raw until the receiver knows the type,
// so routing never decodes a payload it will drop.
type Packet struct {
	Schema             string          `json:"schema"`
	PacketID           string          `json:"packet_id"`
	RequestID          string          `json:"request_id,omitempty"`
	ReplyTo            string          `json:"reply_to,omitempty"`
	ConnectorChannelID string          `json:"connector_channel_id,omitempty"`
	Type               string          `json:"type"`
	Time               int64           `json:"time"`
	Payload            json.RawMessage `json:"payload,omitempty"`
	Error              *PacketError    `json:"error,omitempty"`

	// decoded is the IM v2 payload DecodePacket decoded with the
	// envelope, for the packet's typed decoder (decodedpayload.go).
	decoded *decodedPayload
}

// PacketError is the envelope's `error` member: a stable code and a message.
type PacketError struct {
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
}

// NewPacketID returns a fresh packet ID: "pkt_" and a random UUID.
func NewPacketID() string { return prefixedUUID("pkt_") }

// NewMessageID returns a fresh business message ID: "msg_" and a random UUID
// (M2). A Connector whose platform has stable event IDs should derive the
// message_id from them instead, so a restart cannot mint a second one.
func NewMessageID() string { return prefixedUUID("msg_") }

// prefixedUUID returns prefix and a random (version 4) UUID in its
// canonical form, as prefix + uuid.NewString() does, with one allocation
// (the string) instead of four: it is minted for every packet. The 122
// random bits come from math/rand/v2's top-level generator: ChaCha8 state
// per thread, seeded from the kernel, so an ID costs no system call and no
// lock (BenchmarkNewPacketID: 2.6 times faster than prefix +
// uuid.NewString() on crypto/rand, one allocation instead of three; three
// IDs per round trip). Packet and message IDs must be unique, not secret:
// nothing is authorised by knowing one.
func prefixedUUID(prefix string) string {
	var buf [8 + 36]byte
	return string(appendPrefixedUUID(buf[:0], prefix))
}

// appendPrefixedUUID appends prefix and a random UUID to b.
func appendPrefixedUUID(b []byte, prefix string) []byte {
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 4122
	b = append(b, prefix...)
	b = hex.AppendEncode(b, u[0:4])
	b = append(b, '-')
	b = hex.AppendEncode(b, u[4:6])
	b = append(b, '-')
	b = hex.AppendEncode(b, u[6:8])
	b = append(b, '-')
	b = hex.AppendEncode(b, u[8:10])
	b = append(b, '-')
	b = hex.AppendEncode(b, u[10:16])
	return b
}

// newMessageAndPacketID returns NewMessageID() and NewPacketID() made
// with one allocation (a message sent with a generated ID).
func newMessageAndPacketID() (messageID, packetID string) {
	var buf [2 * (4 + 36)]byte
	s := string(appendPrefixedUUID(appendPrefixedUUID(buf[:0], "msg_"), "pkt_"))
	return s[:4+36], s[4+36:]
}

// NewPacket returns a packet of type typ for channel (empty for
// connection-level packets) with a fresh packet ID, the current time and
// payload encoded as JSON. payload may be a payload struct of this package,
// a json.RawMessage, or nil for `{}`.
func NewPacket(typ, channel string, payload any) (*Packet, error) {
	raw, err := marshalPayload(payload)
	if err != nil {
		return nil, err
	}
	return &Packet{
		Schema:             PacketSchema,
		PacketID:           NewPacketID(),
		ConnectorChannelID: channel,
		Type:               typ,
		Time:               time.Now().UnixMilli(),
		Payload:            raw,
	}, nil
}

// NewResponse returns a packet of type typ answering req: it copies the
// request's request_id and channel and sets reply_to to its packet_id (W9).
func NewResponse(req *Packet, typ string, payload any) (*Packet, error) {
	p, err := NewPacket(typ, req.ConnectorChannelID, payload)
	if err != nil {
		return nil, err
	}
	p.RequestID = req.RequestID
	p.ReplyTo = req.PacketID
	return p, nil
}

// NewErrorPacket returns a `type: "error"` packet for e, one that always
// encodes: a code that is no stable code (empty, over MaxIDBytes, not
// UTF-8) becomes invalid_packet, and the message is made valid UTF-8 and
// cut to 1,024 bytes. When req is not nil the packet answers it
// (reply_to, request_id, channel copied, W9, D12).
func NewErrorPacket(req *Packet, e *Error) *Packet {
	p := &Packet{
		Schema:   PacketSchema,
		PacketID: NewPacketID(),
		Type:     TypeError,
		Time:     time.Now().UnixMilli(),
		Payload:  json.RawMessage("{}"),
		Error:    e.packetError(CodeInvalidPacket),
	}
	if req != nil {
		p.RequestID = req.RequestID
		p.ReplyTo = req.PacketID
		p.ConnectorChannelID = req.ConnectorChannelID
	}
	return p
}

// packetError returns e as an envelope error that always encodes: a
// code that is no stable code (empty, over MaxIDBytes, not UTF-8) becomes
// fallback, and the message is made valid UTF-8 and cut to 1,024 bytes.
// An error's text is often a platform's or a handler's; it must never
// stop the answer, whose absence leaves the peer waiting for its timeout.
func (e *Error) packetError(fallback Code) *PacketError {
	code := e.Code
	if !stableCode(code) {
		code = fallback
	}
	return &PacketError{Code: code, Message: sendableText(e.Message)}
}

func marshalPayload(payload any) (json.RawMessage, error) {
	switch v := payload.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return v, nil
	case *ChatMessageAck:
		w := v.wire()
		return marshalPayload(&w)
	case ChatMessageAck:
		w := v.wire()
		return marshalPayload(&w)
	case []byte:
		return json.RawMessage(v), nil
	}
	b, err := marshalKnown(payload)
	if err != nil {
		return nil, Errorf(CodeInvalidPacket, "encode payload: %w", err)
	}
	return b, nil
}

// packetWire is the decode shape: Time stays raw, to tell absent from 0
// and to read it as the public schema's integer (wireTime).
type packetWire struct {
	Schema             string         `json:"schema"`
	PacketID           string         `json:"packet_id"`
	RequestID          string         `json:"request_id"`
	ReplyTo            string         `json:"reply_to"`
	ConnectorChannelID string         `json:"connector_channel_id"`
	Type               string         `json:"type"`
	Time               jsontext.Value `json:"time"`
	Payload            jsontext.Value `json:"payload"`
	Error              *PacketError   `json:"error"`
}

// DecodePacket parses one frame and checks the envelope once (E1): the
// schema, a non-empty packet_id and type, a non-negative integer time (in
// any notation JSON allows, wireTime), an object payload and a
// well-formed error. Duplicate member names and invalid UTF-8 are errors;
// unknown envelope members are ignored (E5). Every failure is
// an *Error with code invalid_packet (E2).
//
// The payload is judged here as JSON only. But DecodePacket reads an IM
// v2 payload (chat.message, its delta and ack, chat.activity) that
// follows its type member, as peers write it, in the same pass into its
// typed value and keeps that with the packet: the packet's typed decoder
// (DecodeChatMessage and friends, which a Channel's Receive calls) then
// checks that value instead of reading the bytes again. To change a
// decoded packet's payload, assign Payload; its bytes are not read again.
func DecodePacket(data []byte) (*Packet, error) {
	p, hasTime, ok := decodeEnvelopeFast(data)
	if !ok {
		var err error
		if p, hasTime, err = decodeEnvelopeCodec(data); err != nil {
			return nil, err
		}
	}
	if hasTime && p.Time < 0 {
		return p, Errorf(CodeInvalidPacket, "envelope: time is negative")
	}
	if err := p.checkEnvelope(); err != nil {
		return p, err
	}
	return p, nil
}

// decodeEnvelopeCodec is the reference envelope decoder, for every frame
// the fast one does not take.
func decodeEnvelopeCodec(data []byte) (p *Packet, hasTime bool, err error) {
	var w packetWire
	if err := jsonv2.Unmarshal(data, &w); err != nil {
		return nil, false, Errorf(CodeInvalidPacket, "envelope: %s", jsonErrText(err))
	}
	p = &Packet{
		Schema:             w.Schema,
		PacketID:           w.PacketID,
		RequestID:          w.RequestID,
		ReplyTo:            w.ReplyTo,
		ConnectorChannelID: w.ConnectorChannelID,
		Type:               w.Type,
		Payload:            json.RawMessage(w.Payload),
		Error:              w.Error,
	}
	hasTime, err = wireTime(w.Time, &p.Time)
	return p, hasTime, err
}

// wireTime reads the envelope's time as the public schema types it, an
// integer: any JSON number whose value is integral (1790000000000,
// 1.79e12, 1790000000000.0) within int64; a fraction is invalid. A
// missing or null time is absent. DecodePacket refuses a negative one.
func wireTime(raw jsontext.Value, dst *int64) (has bool, err error) {
	switch raw.Kind() {
	case 0, 'n':
		return false, nil
	case '0':
		v, ok := fastjson.IntegralNumber(raw)
		if !ok {
			return true, Errorf(CodeInvalidPacket, "envelope: time %s is not an integer number of Unix milliseconds within int64", shortText(string(raw)))
		}
		*dst = v
		return true, nil
	}
	return true, Errorf(CodeInvalidPacket, "envelope: time is not a number")
}

// Validate checks the envelope rules of E1 on a packet built in Go.
func (p *Packet) Validate() error {
	if p == nil {
		return Errorf(CodeInvalidPacket, "envelope: nil packet")
	}
	if p.Time < 0 {
		return Errorf(CodeInvalidPacket, "envelope: time is negative")
	}
	return p.checkEnvelope()
}

func (p *Packet) checkEnvelope() error {
	switch {
	case p.Schema != PacketSchema:
		return Errorf(CodeInvalidPacket, "envelope: schema must be %q", PacketSchema)
	case p.PacketID == "":
		return Errorf(CodeInvalidPacket, "envelope: packet_id is empty")
	case p.Type == "":
		return Errorf(CodeInvalidPacket, "envelope: type is empty")
	case p.Error != nil && p.Error.Code == "":
		return Errorf(CodeInvalidPacket, "envelope: error.code is empty")
	case len(p.Payload) > 0 && jsontext.Value(p.Payload).Kind() != '{':
		return Errorf(CodeInvalidPacket, "envelope: payload must be an object")
	}
	return nil
}

// Encode returns the packet as one JSON object, ready for a text frame.
func (p *Packet) Encode() ([]byte, error) {
	return p.AppendEncode(make([]byte, 0, p.encodedSize()))
}

// encodedSize is an upper estimate of the encoding, so Encode allocates
// once: the member names, the strings with room for a few escapes, the
// time and the payload.
func (p *Packet) encodedSize() int {
	n := 160 + len(p.Schema) + len(p.PacketID) + len(p.RequestID) + len(p.ReplyTo) +
		len(p.ConnectorChannelID) + len(p.Type) + len(p.Payload)
	if p.Error != nil {
		n += 32 + len(p.Error.Code) + len(p.Error.Message)
	}
	return n + n/16
}

// AppendEncode appends the encoded packet to dst. It checks the envelope
// first, so an invalid packet never reaches the wire.
func (p *Packet) AppendEncode(dst []byte) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return dst, err
	}
	var err error
	dst = append(dst, `{"schema":`...)
	dst = appendString(dst, p.Schema, &err)
	dst = append(dst, `,"packet_id":`...)
	dst = appendString(dst, p.PacketID, &err)
	if p.RequestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = appendString(dst, p.RequestID, &err)
	}
	if p.ReplyTo != "" {
		dst = append(dst, `,"reply_to":`...)
		dst = appendString(dst, p.ReplyTo, &err)
	}
	if p.ConnectorChannelID != "" {
		dst = append(dst, `,"connector_channel_id":`...)
		dst = appendString(dst, p.ConnectorChannelID, &err)
	}
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, p.Type, &err)
	dst = append(dst, `,"time":`...)
	dst = strconv.AppendInt(dst, p.Time, 10)
	if len(p.Payload) > 0 {
		if !jsontext.Value(p.Payload).IsValid() {
			return dst, Errorf(CodeInvalidPacket, "envelope: payload is not valid JSON")
		}
		dst = append(dst, `,"payload":`...)
		dst = append(dst, p.Payload...)
	}
	if p.Error != nil {
		dst = append(dst, `,"error":{"code":`...)
		dst = appendString(dst, string(p.Error.Code), &err)
		if p.Error.Message != "" {
			dst = append(dst, `,"message":`...)
			dst = appendString(dst, p.Error.Message, &err)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, '}')
	if err != nil {
		return dst, Errorf(CodeInvalidPacket, "envelope: %s", jsonErrText(err))
	}
	return dst, nil
}

func appendString(dst []byte, s string, errp *error) []byte {
	out, err := fastjson.AppendQuote(dst, s)
	if err != nil && *errp == nil {
		*errp = err
	}
	return out
}

// Err returns the envelope error of an error packet as an *Error, or nil.
func (p *Packet) Err() *Error {
	if p == nil || p.Error == nil {
		return nil
	}
	return &Error{Code: p.Error.Code, Message: p.Error.Message}
}

// DecodePayload decodes the packet's payload into v with the SDK's strict
// codec (duplicate names and invalid UTF-8 are errors, names match exactly).
// Use it for Common Protocol payloads; the IM v2 packets have typed decoders
// that also validate (DecodeChatMessage and friends).
func (p *Packet) DecodePayload(v any) error {
	payload := p.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if err := jsonv2.Unmarshal(payload, v); err != nil {
		return Errorf(CodeInvalidPacket, "%s payload: %s", p.Type, jsonErrText(err))
	}
	return nil
}

// jsonErrText keeps error messages short and free of input echoes beyond
// what the codec reports.
func jsonErrText(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && se.Err != nil {
		if se.JSONPointer != "" {
			return string(se.JSONPointer) + ": " + se.Err.Error()
		}
		return se.Err.Error()
	}
	return err.Error()
}

// jsonRaw converts codec output to the Payload type without a copy.
func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }

// shortText cuts s for an error message: a peer's value is echoed, never
// a long one.
func shortText(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
