package imv2_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/vectortest"
)

// Fuzz targets: no input may panic a decoder, every failure is an *Error,
// and whatever decodes survives encode → decode unchanged (stable).
// Seeds are the golden vectors. Run one with, for example:
//
//	go test -run '^$' -fuzz FuzzDecodeChatMessage -fuzztime 60s .

// seedVectors adds the bytes of every vector of the given kind whose
// envelope type is typ (any type when typ is ""), as args(data).
func seedVectors(f *testing.F, kind, typ string, args func(data []byte, v vector) []any) {
	f.Helper()
	vectortest.Seeds(f, vectorDir, kind, typ, args)
}

var (
	dataOnly       = vectortest.DataOnly
	mustBeSDKError = vectortest.MustBeSDKError
)

// reencode puts payload into a copy of p's envelope, encodes it and decodes
// the envelope again.
func reencode(t *testing.T, p *imv2.Packet, payload any) *imv2.Packet {
	t.Helper()
	q, err := imv2.NewPacket(p.Type, p.ConnectorChannelID, payload)
	if err != nil {
		t.Fatalf("NewPacket of a decoded payload: %v", err)
	}
	q.PacketID, q.ReplyTo, q.RequestID, q.Time = p.PacketID, p.ReplyTo, p.RequestID, p.Time
	b, err := q.Encode()
	if err != nil {
		t.Fatalf("Encode of a decoded payload: %v", err)
	}
	r, err := imv2.DecodePacket(b)
	if err != nil {
		t.Fatalf("DecodePacket of %s: %v", b, err)
	}
	if !bytes.Equal(r.Payload, q.Payload) {
		t.Fatalf("payload changed on the way: %s vs %s", q.Payload, r.Payload)
	}
	return r
}

func FuzzDecodePacket(f *testing.F) {
	seedVectors(f, "packet", "", dataOnly)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := imv2.DecodePacket(data)
		if err != nil {
			if !errors.Is(err, imv2.ErrInvalidPacket) {
				t.Fatalf("envelope error %v is not invalid_packet", err)
			}
			mustBeSDKError(t, err)
			return
		}
		b, err := p.Encode()
		if err != nil {
			t.Fatalf("Encode of a decoded packet: %v", err)
		}
		q, err := imv2.DecodePacket(b)
		if err != nil {
			t.Fatalf("DecodePacket of the encoding %s: %v", b, err)
		}
		if !reflect.DeepEqual(imv2.WireFields(p), imv2.WireFields(q)) {
			t.Fatalf("unstable:\n%+v\n%+v", p, q)
		}
		b2, err := q.Encode()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("encoding unstable: %s vs %s (%v)", b, b2, err)
		}
	})
}

// normalizeMessage makes an empty files list nil: the wire cannot tell them apart.
func normalizeMessage(m *imv2.ChatMessage) {
	m.Raw = nil // the received bytes; the re-encoding differs in layout
	if len(m.Files) == 0 {
		m.Files = nil
	}
}

func FuzzDecodeChatMessage(f *testing.F) {
	seedVectors(f, "packet", imv2.TypeChatMessage, func(data []byte, v vector) []any {
		return []any{data, v.Direction == "to_xagent"}
	})
	f.Fuzz(func(t *testing.T, data []byte, toXAgent bool) {
		p, err := imv2.DecodePacket(data)
		if err != nil {
			return
		}
		dir := imv2.ToConnector
		if toXAgent {
			dir = imv2.ToXAgent
		}
		m, err := imv2.DecodeChatMessage(p, dir)
		if err != nil {
			mustBeSDKError(t, err)
			return
		}
		r := reencode(t, p, m)
		m2, err := imv2.DecodeChatMessage(r, dir)
		if err != nil {
			t.Fatalf("re-encoded message refused: %v\n%s", err, r.Payload)
		}
		normalizeMessage(m)
		normalizeMessage(m2)
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("unstable:\n%+v\n%+v", m, m2)
		}
		if imv2.FingerprintOf(m) != imv2.FingerprintOf(m2) {
			t.Fatal("fingerprint changed on re-encode")
		}
	})
}

func FuzzDecodeChatMessageDelta(f *testing.F) {
	seedVectors(f, "packet", imv2.TypeChatMessageDelta, dataOnly)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := imv2.DecodePacket(data)
		if err != nil {
			return
		}
		d, err := imv2.DecodeChatMessageDelta(p)
		if err != nil {
			mustBeSDKError(t, err)
			return
		}
		d2, err := imv2.DecodeChatMessageDelta(reencode(t, p, d))
		if err != nil {
			t.Fatalf("re-encoded delta refused: %v", err)
		}
		if *d != *d2 {
			t.Fatalf("unstable:\n%+v\n%+v", d, d2)
		}
	})
}

func FuzzDecodeChatMessageAck(f *testing.F) {
	seedVectors(f, "packet", imv2.TypeChatMessageAck, dataOnly)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := imv2.DecodePacket(data)
		if err != nil {
			return
		}
		a, err := imv2.DecodeChatMessageAck(p)
		if err != nil {
			mustBeSDKError(t, err)
			return
		}
		a2, err := imv2.DecodeChatMessageAck(reencode(t, p, a))
		if err != nil {
			t.Fatalf("re-encoded ack refused: %v", err)
		}
		if *a != *a2 {
			t.Fatalf("unstable:\n%+v\n%+v", a, a2)
		}
	})
}

func FuzzDecodeChatActivity(f *testing.F) {
	seedVectors(f, "packet", imv2.TypeChatActivity, dataOnly)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := imv2.DecodePacket(data)
		if err != nil {
			return
		}
		a, err := imv2.DecodeChatActivity(p)
		if err != nil {
			mustBeSDKError(t, err)
			return
		}
		a2, err := imv2.DecodeChatActivity(reencode(t, p, a))
		if err != nil {
			t.Fatalf("re-encoded activity refused: %v", err)
		}
		if *a != *a2 {
			t.Fatalf("unstable:\n%+v\n%+v", a, a2)
		}
	})
}
