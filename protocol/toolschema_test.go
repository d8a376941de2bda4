package protocol_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

func TestToolInputSchema_H2_InjectsChannelID(t *testing.T) {
	s, err := protocol.ToolInputSchema(map[string]json.RawMessage{
		"text": json.RawMessage(`{ "type": "string", "description": "Text to send." }`),
		"file": json.RawMessage(`{"type":"string"}`),
	}, "text", "text")
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.CheckToolInputSchema(s); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	var got struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(s, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != "object" || len(got.Properties) != 3 || strings.Join(got.Required, ",") != "connector_channel_id,text" {
		t.Errorf("schema %s", s)
	}
	var ch struct{ Type, Description string }
	if err := json.Unmarshal(got.Properties["connector_channel_id"], &ch); err != nil || ch.Type != "string" || ch.Description == "" {
		t.Errorf("connector_channel_id property %s", got.Properties["connector_channel_id"])
	}
}

func TestToolInputSchema_H2_Deterministic(t *testing.T) {
	props := map[string]json.RawMessage{}
	for _, n := range []string{"z", "a", "m", "b", "y"} {
		props[n] = json.RawMessage(`{"type":"string","description":"` + n + `","default":"x"}`)
	}
	first, err := protocol.ToolInputSchema(props, "m", "a")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // map iteration order differs between runs
		again, err := protocol.ToolInputSchema(props, "m", "a")
		if err != nil || string(again) != string(first) {
			t.Fatalf("not deterministic:\n%s\n%s", first, again)
		}
	}
	want := `{"properties":{"a":{"default":"x","description":"a","type":"string"},"b":`
	if !strings.HasPrefix(string(first), want) {
		t.Errorf("keys not sorted at every level: %s", first)
	}
	if !strings.HasSuffix(string(first), `"required":["connector_channel_id","m","a"],"type":"object"}`) {
		t.Errorf("required order: %s", first)
	}
}

func TestToolInputSchema_H2_Errors(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]json.RawMessage
		req   []string
	}{
		{"connector_card_id property", map[string]json.RawMessage{"connector_card_id": json.RawMessage(`{"type":"string"}`)}, nil},
		{"channel id not a string", map[string]json.RawMessage{"connector_channel_id": json.RawMessage(`{"type":"integer"}`)}, nil},
		{"required names no property", map[string]json.RawMessage{"text": json.RawMessage(`{}`)}, []string{"txt"}},
		{"property not JSON", map[string]json.RawMessage{"text": json.RawMessage(`{"type":`)}, nil},
		{"property not a schema", map[string]json.RawMessage{"text": json.RawMessage(`"string"`)}, nil},
		{"empty property name", map[string]json.RawMessage{"": json.RawMessage(`{}`)}, nil},
	}
	for _, c := range cases {
		_, err := protocol.ToolInputSchema(c.props, c.req...)
		if !errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}) {
			t.Errorf("%s: err = %v, want invalid_packet", c.name, err)
		}
	}
	// A caller's own string-typed channel property is kept, not replaced.
	s, err := protocol.ToolInputSchema(map[string]json.RawMessage{"connector_channel_id": json.RawMessage(`{"type":"string","description":"mine"}`)})
	if err != nil || !strings.Contains(string(s), `"mine"`) {
		t.Errorf("own channel property: %s %v", s, err)
	}
	// Boolean schemas are schemas.
	if _, err := protocol.ToolInputSchema(map[string]json.RawMessage{"anything": json.RawMessage(`true`)}); err != nil {
		t.Errorf("boolean schema: %v", err)
	}
}

func TestWithConnectorChannelID_H2(t *testing.T) {
	in := json.RawMessage(`{"additionalProperties":false,"properties":{"text":{"type":"string"}},"required":["text"]}`)
	out, err := protocol.WithConnectorChannelID(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.CheckToolInputSchema(out); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if !strings.Contains(string(out), `"additionalProperties":false`) || !strings.Contains(string(out), `"required":["connector_channel_id","text"]`) {
		t.Errorf("members lost or required wrong: %s", out)
	}
	twice, err := protocol.WithConnectorChannelID(out)
	if err != nil || string(twice) != string(out) {
		t.Errorf("not idempotent:\n%s\n%s", out, twice)
	}
	empty, err := protocol.WithConnectorChannelID(json.RawMessage(`{}`))
	if err != nil || protocol.CheckToolInputSchema(empty) != nil {
		t.Errorf("{}: %s %v", empty, err)
	}
	for _, bad := range []string{``, `null`, `[]`, `"object"`, `{"type":"array"}`, `{"properties":[]}`, `{"required":"text"}`,
		`{"properties":{"connector_card_id":{"type":"string"}}}`, `{"properties":{"connector_channel_id":{"type":"number"}}}`,
		`{"type":"object","type":"object"}`} {
		if _, err := protocol.WithConnectorChannelID(json.RawMessage(bad)); !errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}) {
			t.Errorf("%s: err = %v, want invalid_packet", bad, err)
		}
	}
}

func TestCheckToolInputSchema_H2(t *testing.T) {
	good := `{"type":"object","properties":{"connector_channel_id":{"type":"string"}},"required":["connector_channel_id"]}`
	if err := protocol.CheckToolInputSchema(json.RawMessage(good)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		``, `[]`, `{}`,
		`{"type":["object"],"properties":{"connector_channel_id":{"type":"string"}},"required":["connector_channel_id"]}`,
		`{"type":"object","properties":{"connector_channel_id":true},"required":["connector_channel_id"]}`,
		`{"type":"object","properties":{"connector_channel_id":{"type":"string"}}}`,
		`{"type":"object","properties":{"connector_channel_id":{"type":"string"},"connector_card_id":{}},"required":["connector_channel_id"]}`,
	} {
		if err := protocol.CheckToolInputSchema(json.RawMessage(bad)); err == nil || err.Code != imv2.CodeInvalidPacket {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}
