package protocol_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/vectortest"
	"github.com/xagentkit/imv2/protocol"
)

// The golden vectors of the Common Protocol control plane live in
// testdata/vectors, one Card, Descriptor or Common Protocol packet per
// file, described by testdata/vectors/manifest.json (read by
// internal/vectortest, as the root's envelope and IM v2 vectors are). The
// repository's JSON Schemas (schemas/) cover only the IM v2 payloads, so
// these vectors are judged by the decoders alone.

const vectorDir = "testdata/vectors"

type vector = vectortest.Vector

func loadManifest(tb testing.TB) []vector { return vectortest.Load(tb, vectorDir) }

func readVector(tb testing.TB, file string) []byte { return vectortest.Read(tb, vectorDir, file) }

// cpPayloads maps each Common Protocol packet type to a fresh value of
// its payload struct.
var cpPayloads = map[string]func() any{
	protocol.TypeConnectorHello:    func() any { return new(protocol.ConnectorHello) },
	protocol.TypeConnectorHelloAck: func() any { return new(protocol.ConnectorHelloAck) },
	protocol.TypeChannelOpen:       func() any { return new(protocol.ChannelOpen) },
	protocol.TypeChannelOpenAck:    func() any { return new(protocol.ChannelOpenAck) },
	protocol.TypeChannelClose:      func() any { return new(struct{}) },
	protocol.TypeChannelCloseAck:   func() any { return new(protocol.StatusOK) },
	protocol.TypeDescriptorGet:     func() any { return new(struct{}) },
	protocol.TypeDescriptorGetAck:  func() any { return new(protocol.DescriptorPayload) },
	protocol.TypeDescriptorPush:    func() any { return new(protocol.DescriptorPayload) },
	protocol.TypePing:              func() any { return new(struct{}) },
	protocol.TypePong:              func() any { return new(struct{}) },
	protocol.TypeToolInvoke:        func() any { return new(protocol.ToolInvoke) },
	protocol.TypeToolInvokeAck:     func() any { return new(protocol.ToolInvokeAck) },
	protocol.TypeAuthStart:         func() any { return new(protocol.AuthStart) },
	protocol.TypeAuthStartAck:      func() any { return new(protocol.AuthAck) },
	protocol.TypeAuthStatus:        func() any { return new(protocol.AuthStatusRequest) },
	protocol.TypeAuthStatusAck:     func() any { return new(protocol.AuthAck) },
	protocol.TypeAuthCancel:        func() any { return new(protocol.AuthCancel) },
	protocol.TypeAuthCancelAck:     func() any { return new(protocol.AuthCancelAck) },
	protocol.TypeAuthLogout:        func() any { return new(struct{}) },
	protocol.TypeAuthLogoutAck:     func() any { return new(protocol.StatusOK) },
}

// embeddedDescriptor returns the connection_descriptor a CP payload carries, if any.
func embeddedDescriptor(v any) *protocol.Descriptor {
	switch p := v.(type) {
	case *protocol.ChannelOpenAck:
		return p.ConnectionDescriptor
	case *protocol.DescriptorPayload:
		return p.ConnectionDescriptor
	case *protocol.StatusOK:
		return p.ConnectionDescriptor
	case *protocol.AuthAck:
		return p.ConnectionDescriptor
	case *protocol.AuthCancelAck:
		return p.ConnectionDescriptor
	}
	return nil
}

// runVector decodes one vector the way a peer would: DecodeCard,
// DecodeDescriptor (against the vector's Card, if it names one), or
// DecodePacket and DecodePayload into the type's payload struct, whose
// embedded Descriptor is then validated. It returns the decoder's error.
func runVector(t *testing.T, v vector, data []byte) error {
	t.Helper()
	if v.Direction != "" || v.Schema != nil {
		t.Fatalf("direction and schema are for IM v2 packet vectors, which are the root package's")
	}
	switch v.Kind {
	case "card":
		_, err := protocol.DecodeCard(data)
		return err
	case "card-admission": // xAgent's admission of a fetched Card
		_, err := protocol.AdmitCard(data)
		return err
	case "descriptor", "descriptor-admission":
		var card *protocol.Card
		if v.Card != "" {
			var err error
			card, err = protocol.DecodeCard(readVector(t, v.Card))
			if err != nil {
				t.Fatalf("card %s of a descriptor vector: %v", v.Card, err)
			}
		}
		if v.Kind == "descriptor-admission" { // as xAgent receives one
			_, err := protocol.AdmitDescriptor(data, card)
			return err
		}
		_, err := protocol.DecodeDescriptor(data, card)
		return err
	case "packet":
	default:
		t.Fatalf("unknown kind %q", v.Kind)
	}
	p, err := imv2.DecodePacket(data)
	if err != nil {
		return err
	}
	mk, ok := cpPayloads[p.Type]
	if !ok {
		t.Fatalf("no payload struct for packet type %q (IM v2 and error vectors are the root package's)", p.Type)
	}
	payload := mk()
	if err := p.DecodePayload(payload); err != nil {
		return err
	}
	if d := embeddedDescriptor(payload); d != nil {
		return d.Validate(nil)
	}
	return nil
}

// TestVectors runs every golden vector and compares the result with the
// manifest: a valid vector decodes and validates, an invalid one is
// refused with the expected code and a message containing the expected
// fragment.
func TestVectors(t *testing.T) {
	for _, v := range loadManifest(t) {
		t.Run(v.Name(), func(t *testing.T) {
			err := runVector(t, v, readVector(t, v.File))
			if v.Expect == "ok" {
				if err != nil {
					t.Fatalf("want ok, got %v (%s)", err, v.Note)
				}
				return
			}
			vectortest.CheckRefused(t, v, err)
		})
	}
}

// TestVectors_ManifestMatchesFiles fails when a vector file is not in the
// manifest, a manifest entry has no file or is malformed, an invalid
// vector has no message fragment, or a descriptor names a Card that is
// not a valid Card vector.
func TestVectors_ManifestMatchesFiles(t *testing.T) {
	vectors := loadManifest(t)
	vectortest.CheckManifest(t, vectorDir, vectors)
	for _, v := range vectors {
		if v.Expect != "ok" && v.Message == "" {
			t.Errorf("%s: an invalid vector needs the message fragment of its refusal", v.File)
		}
		if v.Card == "" {
			continue
		}
		if v.Kind != "descriptor" && v.Kind != "descriptor-admission" {
			t.Errorf("%s: only a descriptor vector names a card", v.File)
		}
		if !slices.ContainsFunc(vectors, func(c vector) bool { return c.File == v.Card && c.Kind == "card" && c.Expect == "ok" }) {
			t.Errorf("%s: card %s is not a valid card vector", v.File, v.Card)
		}
	}
}

// TestVectors_Coverage fails when the vectors stop covering a Card,
// Descriptor or Common Protocol rule ID, a kind (valid and invalid), or
// a Common Protocol packet type.
func TestVectors_Coverage(t *testing.T) {
	vectors := loadManifest(t)
	if len(vectors) < 100 {
		t.Errorf("%d vectors, want at least 100", len(vectors))
	}
	rules := map[string]bool{}
	for _, v := range vectors {
		for _, r := range v.Rules {
			rules[r] = true
		}
	}
	for _, r := range strings.Fields("P1 P2 P3 P5 P8 H1 H2 H3 H5 W3 W4 W12") {
		if !rules[r] {
			t.Errorf("rule %s is exercised by no vector", r)
		}
	}
	type seen struct{ ok, bad bool }
	kinds := map[string]*seen{}
	types := map[string]*seen{}
	mark := func(m map[string]*seen, key string, ok bool) {
		s := m[key]
		if s == nil {
			s = &seen{}
			m[key] = s
		}
		if ok {
			s.ok = true
		} else {
			s.bad = true
		}
	}
	for _, v := range vectors {
		mark(kinds, v.Kind, v.Expect == "ok")
		if v.Kind != "packet" {
			continue
		}
		if p, err := imv2.DecodePacket(readVector(t, v.File)); err == nil {
			mark(types, p.Type, v.Expect == "ok")
		}
	}
	for _, k := range []string{"card", "descriptor", "packet"} {
		if s := kinds[k]; s == nil || !s.ok || !s.bad {
			t.Errorf("%s: want valid and invalid vectors", k)
		}
	}
	for typ := range cpPayloads {
		if s := types[typ]; s == nil || !s.ok {
			t.Errorf("%s: no valid vector", typ)
		}
	}
}
