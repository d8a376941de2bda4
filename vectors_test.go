package imv2_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/vectortest"
)

// The golden vectors of the envelope and the four IM v2 payloads live in
// testdata/vectors, one packet per file, described by
// testdata/vectors/manifest.json (read by internal/vectortest). One table
// test runs them all through the SDK's decoders and, for the IM v2
// payloads, through the JSON Schemas in schemas/. The Card, Descriptor and
// Common Protocol payload vectors are package protocol's
// (protocol/testdata/vectors).

const vectorDir = "testdata/vectors"

type vector = vectortest.Vector

func loadManifest(tb testing.TB) []vector { return vectortest.Load(tb, vectorDir) }

func readVector(tb testing.TB, file string) []byte { return vectortest.Read(tb, vectorDir, file) }

func parseDirection(s string) imv2.Direction {
	switch s {
	case "to_connector":
		return imv2.ToConnector
	case "to_xagent":
		return imv2.ToXAgent
	}
	return 0
}

var imTypes = []string{imv2.TypeChatMessage, imv2.TypeChatMessageDelta, imv2.TypeChatMessageAck, imv2.TypeChatActivity}

// envelopeTypes are the packet types whose vectors here check only the
// envelope: error (W10, the root's) and the empty-payload ping and pong
// the envelope vectors use. Their payloads, like every other Common
// Protocol payload, are package protocol's vectors.
var envelopeTypes = []string{imv2.TypeError, "ping", "pong"}

// negotiatedIMv2 is what a channel gets when both sides offer xagent.im.v2.
func negotiatedIMv2() *imv2.Negotiated {
	return imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
}

// decodeIM runs the typed decoder of an IM v2 packet.
func decodeIM(p *imv2.Packet, dir imv2.Direction) (any, error) {
	switch p.Type {
	case imv2.TypeChatMessage:
		return imv2.DecodeChatMessage(p, dir)
	case imv2.TypeChatMessageDelta:
		return imv2.DecodeChatMessageDelta(p)
	case imv2.TypeChatMessageAck:
		return imv2.DecodeChatMessageAck(p)
	case imv2.TypeChatActivity:
		return imv2.DecodeChatActivity(p)
	}
	return nil, errors.New("not an IM v2 type: " + p.Type)
}

// runVector decodes one vector the way a peer would. It returns
// "dropped" for a packet the negotiated catalog refuses (P6), the decoded
// packet (nil when the envelope fails), and the decoder's error.
func runVector(t *testing.T, v vector, data []byte) (dropped bool, p *imv2.Packet, err error) {
	t.Helper()
	if v.Kind != "packet" {
		t.Fatalf("kind %q: only packet vectors live here (Cards and Descriptors are package protocol's)", v.Kind)
	}
	p, err = imv2.DecodePacket(data)
	if err != nil {
		return false, nil, err
	}
	if slices.Contains(imTypes, p.Type) {
		dir := parseDirection(v.Direction)
		if dir == 0 {
			t.Fatalf("IM v2 packet vector needs direction to_connector or to_xagent, has %q", v.Direction)
		}
		if !negotiatedIMv2().Allows(p.Type, dir) {
			return true, p, nil
		}
		_, err = decodeIM(p, dir)
		return false, p, err
	}
	if v.Direction != "" {
		t.Fatalf("direction %q on a packet that is not IM v2", v.Direction)
	}
	if !slices.Contains(envelopeTypes, p.Type) {
		t.Fatalf("packet type %q: a Common Protocol payload vector belongs in protocol/testdata/vectors", p.Type)
	}
	return false, p, nil
}

// compileIMSchemas compiles schemas/xagent.im.v2.<type>.schema.json for
// each IM v2 packet type.
func compileIMSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	out := map[string]*jsonschema.Schema{}
	for _, typ := range imTypes {
		path := filepath.Join("schemas", "xagent.im.v2."+typ+".schema.json")
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := c.AddResource(path, doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		s, err := c.Compile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[typ] = s
	}
	return out
}

func validatePayload(s *jsonschema.Schema, payload []byte) error {
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// TestVectors runs every golden vector: decode with DecodePacket and the
// typed IM decoder, compare with the expected result, check IM payloads
// against schemas/, and re-encode every valid packet.
func TestVectors(t *testing.T) {
	vectors := loadManifest(t)
	schemas := compileIMSchemas(t)
	for _, v := range vectors {
		t.Run(v.Name(), func(t *testing.T) {
			data := readVector(t, v.File)
			dropped, p, err := runVector(t, v, data)
			switch {
			case v.Expect == "ok":
				if err != nil || dropped {
					t.Fatalf("want ok, got err=%v dropped=%v (%s)", err, dropped, v.Note)
				}
			case v.Expect == "dropped":
				if !dropped {
					t.Fatalf("want the packet dropped by the negotiated catalog (P6), got err=%v (%s)", err, v.Note)
				}
			default:
				if dropped {
					t.Fatalf("want %s, the packet was dropped instead (%s)", v.Expect, v.Note)
				}
				vectortest.CheckRefused(t, v, err)
			}
			if p != nil && slices.Contains(imTypes, p.Type) {
				checkSchema(t, schemas[p.Type], v, p.Payload)
			}
			if p != nil && err == nil {
				checkReencode(t, p)
			}
		})
	}
}

// checkSchema validates an IM payload against its schema: valid vectors
// must pass, invalid ones must fail unless the manifest says the schema
// cannot tell (and then they must pass, so the flag stays honest).
func checkSchema(t *testing.T, s *jsonschema.Schema, v vector, payload []byte) {
	t.Helper()
	err := validatePayload(s, payload)
	wantValid := v.Expect == "ok" || v.Expect == "dropped" || (v.Schema != nil && !*v.Schema)
	switch {
	case wantValid && err != nil:
		t.Errorf("schema rejects a payload it should accept: %v", err)
	case !wantValid && err == nil:
		t.Errorf("schema accepts a payload the SDK rejects with %s; tighten the schema or mark the vector \"schema\": false", v.Expect)
	}
	if v.Schema != nil && *v.Schema && wantValid {
		t.Errorf(`"schema": true is the default; drop it`)
	}
}

// checkReencode encodes a decoded packet and decodes it again: the result
// must equal the first decode.
func checkReencode(t *testing.T, p *imv2.Packet) {
	t.Helper()
	b, err := p.Encode()
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	q, err := imv2.DecodePacket(b)
	if err != nil {
		t.Fatalf("decode of re-encoded packet: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(imv2.WireFields(p), imv2.WireFields(q)) {
		t.Fatalf("re-encoded packet differs:\n%+v\n%+v", p, q)
	}
}

// TestVectors_ManifestMatchesFiles fails when a vector file is not in the
// manifest, a manifest entry has no file, or an entry is malformed.
func TestVectors_ManifestMatchesFiles(t *testing.T) {
	vectortest.CheckManifest(t, vectorDir, loadManifest(t))
}

// TestVectors_Coverage fails when the vectors stop covering a rule ID of
// the Foundation issue, an IM v2 packet type (valid and invalid), or an
// envelope-only packet type.
func TestVectors_Coverage(t *testing.T) {
	vectors := loadManifest(t)
	if len(vectors) < 140 {
		t.Errorf("%d vectors, want at least 140", len(vectors))
	}
	rules := map[string]bool{}
	for _, v := range vectors {
		for _, r := range v.Rules {
			rules[r] = true
		}
	}
	want := strings.Fields("I1 I2 I3 I4 E1 E2 E3 M1 M2 M3 M4 M5 M6 M7 M8 D2 D7 A1 A2 A3 C2 C3 C4 P6 W10")
	for _, r := range want {
		if !rules[r] {
			t.Errorf("rule %s is exercised by no vector", r)
		}
	}
	type seen struct{ ok, bad bool }
	types := map[string]*seen{}
	for _, v := range vectors {
		if v.Kind != "packet" {
			continue
		}
		p, err := imv2.DecodePacket(readVector(t, v.File))
		if err != nil {
			continue
		}
		s := types[p.Type]
		if s == nil {
			s = &seen{}
			types[p.Type] = s
		}
		if v.Expect == "ok" {
			s.ok = true
		} else {
			s.bad = true
		}
	}
	for _, typ := range imTypes {
		if s := types[typ]; s == nil || !s.ok || !s.bad {
			t.Errorf("%s: want valid and invalid vectors", typ)
		}
	}
	for _, typ := range envelopeTypes {
		if s := types[typ]; s == nil || !s.ok {
			t.Errorf("%s: no valid vector", typ)
		}
	}
}
