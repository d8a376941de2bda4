package imv2

import (
	"sync/atomic"
	"unsafe"
)

// A packet DecodePacket read carries the IM v2 payload it decoded in the
// same pass (decodeEnvelopeFast), and the typed decoder of the packet
// (DecodeChatMessage and friends) takes it instead of reading the payload
// a second time. The typed decoder still checks everything it checks on
// a payload it decodes itself (route, direction, the message rules); what
// it skips is the second walk of the bytes, which found the same value.

// decodedPayload is the payload a packet's envelope scan decoded.
type decodedPayload struct {
	// taken hands the value to one typed decoder: a second call (or one
	// on a copy of the Packet, which shares this) decodes its own, so no
	// two callers share a value one of them may change.
	taken atomic.Bool
	// of is Packet.Payload's array and n its length when it was decoded:
	// a packet whose Payload was replaced decodes the new one.
	of *byte
	n  int
	v  any // *ChatMessage, *ChatMessageDelta, *ackWire or *ChatActivity
}

// boxed is a decoded packet with its payload in one allocation.
type boxed[T any] struct {
	p Packet
	d decodedPayload
	v T
}

// takeDecoded returns the payload p's envelope scan decoded, if it was a
// *T of p's current Payload and no one took it yet; nil otherwise.
func takeDecoded[T any](p *Packet) *T {
	d := p.decoded
	if d == nil || len(p.Payload) != d.n || unsafe.SliceData(p.Payload) != d.of {
		return nil
	}
	v, ok := d.v.(*T)
	if !ok || !d.taken.CompareAndSwap(false, true) {
		return nil
	}
	return v
}

// payloadValues holds, on decodeEnvelopeFast's stack, the payload it
// decoded: kind says which one, if any.
type payloadValues struct {
	kind  byte
	msg   ChatMessage
	delta ChatMessageDelta
	ack   ackWire
	act   ChatActivity
}

// The kinds of payloadValues.
const (
	kindNone byte = iota
	kindMessage
	kindDelta
	kindAck
	kindActivity
)

// payload reads the payload object at the cursor with the reader of typ,
// one of the four IM v2 types, into v (a chat.message's short strings
// deferred to d). It reports false, with the cursor and d as they were,
// for any other type or a payload that reader does not take: the caller
// then only checks it.
func (s *scanner) payload(typ string, v *payloadValues, d *deferredStrs) bool {
	start, n, size := s.i, d.n, d.size
	s.forbid = true // the rules of an IM v2 payload, at every depth
	var kind byte
	var ok bool
	switch typ {
	case TypeChatMessage:
		kind, ok = kindMessage, s.chatMessage(&v.msg, d)
	case TypeChatMessageDelta:
		kind, ok = kindDelta, s.delta(&v.delta)
	case TypeChatMessageAck:
		kind, ok = kindAck, s.ack(&v.ack)
	case TypeChatActivity:
		kind, ok = kindActivity, s.activity(&v.act)
	}
	s.forbid = false
	if !ok {
		s.i, d.n, d.size = start, n, size
		*v = payloadValues{}
		return false
	}
	v.kind = kind
	return true
}

// box returns the heap packet for pk, in one allocation with the payload
// v holds, if any (the message too, for the deferred strings).
func (v *payloadValues) box(pk *Packet) (*Packet, *ChatMessage) {
	switch v.kind {
	case kindMessage:
		b := &boxed[ChatMessage]{p: *pk, v: v.msg}
		b.d.v = &b.v
		b.p.decoded = &b.d
		return &b.p, &b.v
	case kindDelta:
		b := &boxed[ChatMessageDelta]{p: *pk, v: v.delta}
		b.d.v = &b.v
		b.p.decoded = &b.d
		return &b.p, nil
	case kindAck:
		b := &boxed[ackWire]{p: *pk, v: v.ack}
		b.d.v = &b.v
		b.p.decoded = &b.d
		return &b.p, nil
	case kindActivity:
		b := &boxed[ChatActivity]{p: *pk, v: v.act}
		b.d.v = &b.v
		b.p.decoded = &b.d
		return &b.p, nil
	}
	p := new(Packet)
	*p = *pk
	return p, nil
}
