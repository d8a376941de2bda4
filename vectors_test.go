package imv2_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// The golden vectors live in testdata/vectors, one packet, Card or
// Descriptor per file, described by testdata/vectors/manifest.json. One
// table test runs them all through the SDK's decoders and, for the IM v2
// payloads, through the JSON Schemas in schemas/.

const vectorDir = "testdata/vectors"

// vector is one manifest entry.
type vector struct {
	File string `json:"file"`
	// Kind is packet, card or descriptor.
	Kind string `json:"kind"`
	// Direction is to_connector or to_xagent; IM v2 packets only.
	Direction string `json:"direction,omitempty"`
	// Expect is "ok", "dropped" (the negotiated catalog refuses the
	// packet's direction: P6) or the expected error code.
	Expect string `json:"expect"`
	// Rules are the requirement IDs the vector exercises.
	Rules []string `json:"rules"`
	// Schema false marks an invalid IM vector whose payload the JSON
	// Schema cannot judge (the rule lives in the envelope, the direction,
	// or needs unique-by-member); its payload must then pass the schema.
	Schema *bool `json:"schema,omitempty"`
	// Card is the Card file a descriptor's cross rules are checked against.
	Card string `json:"card,omitempty"`
	Note string `json:"note"`
}

func loadManifest(tb testing.TB) []vector {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(vectorDir, "manifest.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var m struct {
		Vectors []vector `json:"vectors"`
	}
	if err := jsonv2.Unmarshal(data, &m, jsonv2.RejectUnknownMembers(true)); err != nil {
		tb.Fatalf("manifest: %v", err)
	}
	return m.Vectors
}

func readVector(tb testing.TB, file string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(vectorDir, filepath.FromSlash(file)))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

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

// cpPayloads maps each Common Protocol packet type to a fresh value of
// its payload struct from commonprotocol.go.
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
	imv2.TypeError:                 func() any { return new(struct{}) },
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
// packet (nil for cards and descriptors or when the envelope fails), and
// the decoder's error.
func runVector(t *testing.T, v vector, data []byte) (dropped bool, p *imv2.Packet, err error) {
	t.Helper()
	switch v.Kind {
	case "card":
		_, err = protocol.DecodeCard(data)
		return false, nil, err
	case "descriptor":
		var card *protocol.Card
		if v.Card != "" {
			card, err = protocol.DecodeCard(readVector(t, v.Card))
			if err != nil {
				t.Fatalf("card %s of a descriptor vector: %v", v.Card, err)
			}
		}
		_, err = protocol.DecodeDescriptor(data, card)
		return false, nil, err
	case "packet":
	default:
		t.Fatalf("unknown kind %q", v.Kind)
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
		t.Fatalf("direction %q on a Common Protocol packet", v.Direction)
	}
	mk, ok := cpPayloads[p.Type]
	if !ok {
		t.Fatalf("no payload struct for packet type %q", p.Type)
	}
	payload := mk()
	if err = p.DecodePayload(payload); err != nil {
		return false, p, err
	}
	if d := embeddedDescriptor(payload); d != nil {
		err = d.Validate(nil)
	}
	return false, p, err
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
// typed IM decoder (or DecodePayload for Common Protocol packets, or
// DecodeCard / DecodeDescriptor), compare with the expected result, check
// IM payloads against schemas/, and re-encode every valid packet.
func TestVectors(t *testing.T) {
	vectors := loadManifest(t)
	schemas := compileIMSchemas(t)
	for _, v := range vectors {
		// The name carries the rule IDs, then the file without slashes
		// (a slash would nest subtests and confuse -run).
		name := strings.Join(v.Rules, "_") + "__" + strings.ReplaceAll(strings.TrimSuffix(v.File, ".json"), "/", "_")
		t.Run(name, func(t *testing.T) {
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
				if err == nil {
					t.Fatalf("want error %s, got none (%s)", v.Expect, v.Note)
				}
				if !errors.Is(err, &imv2.Error{Code: imv2.Code(v.Expect)}) {
					t.Fatalf("want error %s, got %v (%s)", v.Expect, err, v.Note)
				}
				var e *imv2.Error
				if !errors.As(err, &e) || e.Message == "" {
					t.Fatalf("error %v has no message", err)
				}
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
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("re-encoded packet differs:\n%+v\n%+v", p, q)
	}
}

// TestVectors_ManifestMatchesFiles fails when a vector file is not in the
// manifest, a manifest entry has no file, or an entry is malformed.
func TestVectors_ManifestMatchesFiles(t *testing.T) {
	vectors := loadManifest(t)
	listed := map[string]bool{}
	ruleID := regexp.MustCompile(`^[PIEMDACSXWHTK][1-9][0-9]*$`)
	for _, v := range vectors {
		if listed[v.File] {
			t.Errorf("%s: listed twice", v.File)
		}
		listed[v.File] = true
		if _, err := os.Stat(filepath.Join(vectorDir, filepath.FromSlash(v.File))); err != nil {
			t.Errorf("%s: manifest entry without a file: %v", v.File, err)
		}
		if len(v.Rules) == 0 {
			t.Errorf("%s: no rule IDs", v.File)
		}
		for _, r := range v.Rules {
			if !ruleID.MatchString(r) {
				t.Errorf("%s: %q is not a rule ID", v.File, r)
			}
		}
		if v.Expect == "" || v.Note == "" {
			t.Errorf("%s: expect and note are required", v.File)
		}
		if v.Kind == "descriptor" && v.Card != "" && !slices.ContainsFunc(vectors, func(c vector) bool { return c.File == v.Card && c.Kind == "card" && c.Expect == "ok" }) {
			t.Errorf("%s: card %s is not a valid card vector", v.File, v.Card)
		}
	}
	err := filepath.WalkDir(vectorDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, vectorDir+string(filepath.Separator)))
		if rel != "manifest.json" && !listed[rel] {
			t.Errorf("%s: vector file not in the manifest", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVectors_Coverage fails when the vectors stop covering a rule ID of
// the Foundation issue, an IM v2 packet type (valid and invalid), or a
// Common Protocol packet type.
func TestVectors_Coverage(t *testing.T) {
	vectors := loadManifest(t)
	if len(vectors) < 90 {
		t.Errorf("%d vectors, want at least 90", len(vectors))
	}
	rules := map[string]bool{}
	for _, v := range vectors {
		for _, r := range v.Rules {
			rules[r] = true
		}
	}
	want := strings.Fields("I1 I2 I3 I4 E1 E2 E3 M1 M2 M3 M4 M5 M6 M7 M8 D2 D7 A1 A2 A3 C2 C3 C4 P1 P2 P8 H1 H2 H5")
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
	for typ := range cpPayloads {
		if s := types[typ]; s == nil || !s.ok {
			t.Errorf("%s: no valid vector", typ)
		}
	}
}
