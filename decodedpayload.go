package imv2

import (
	"sync/atomic"
	"unsafe"

	"github.com/xagentkit/imv2/internal/fastjson"
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

// boxed is a decoded packet and its decoded payload in one allocation:
// the packet keeps the value alive (a Channel's Budget counts it, see
// queuedCost), and taking the value costs no allocation of its own.
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

// decodePayload reads the payload object at the cursor with the reader
// of typ, one of the four IM v2 types, straight into a boxed packet (its
// short strings deferred to d), and returns that packet, whose envelope
// the caller fills, and the message, if it is one. It returns p = nil,
// with the cursor and d as they were, for any other type or a payload
// that reader does not take: the caller then only checks it.
func decodePayload(s *fastjson.Scanner, typ string, d *fastjson.Deferred) (p *Packet, m *ChatMessage) {
	start, mark := s.Pos(), d.Mark()
	s.SetRules(rulesOf(typ), deepRulesOf(typ)) // the rules of an IM v2 payload
	var dec *decodedPayload
	var ok bool
	switch typ {
	case TypeChatMessage:
		b := new(boxed[ChatMessage])
		p, dec, m = &b.p, &b.d, &b.v
		dec.v, ok = m, readChatMessage(s, m, d)
	case TypeChatMessageDelta:
		b := new(boxed[ChatMessageDelta])
		p, dec = &b.p, &b.d
		dec.v, ok = &b.v, readDelta(s, &b.v, d)
	case TypeChatMessageAck:
		b := new(boxed[ackWire])
		p, dec = &b.p, &b.d
		dec.v, ok = &b.v, readAck(s, &b.v, d)
	case TypeChatActivity:
		b := new(boxed[ChatActivity])
		p, dec = &b.p, &b.d
		dec.v, ok = &b.v, readActivity(s, &b.v, d)
	}
	s.SetRules(nil, nil)
	if !ok {
		s.Seek(start)
		d.Restore(mark)
		return nil, nil
	}
	p.decoded = dec
	return p, m
}
