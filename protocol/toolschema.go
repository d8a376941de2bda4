package protocol

import (
	"encoding/json"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/xagentkit/imv2"
)

// Argument names H2 rules on.
const (
	// channelIDArg is the tool argument every Card tool must declare and
	// require (H2). xAgent fills it in, but the Connector routes by the
	// envelope's connector_channel_id only (W12).
	channelIDArg = "connector_channel_id"
	// cardIDArg is the tool argument no Card tool may declare (H2).
	cardIDArg = "connector_card_id"
)

// channelIDProperty is the schema ToolInputSchema injects for
// connector_channel_id: a string, described for the agent.
const channelIDProperty = `{"description":"The user-level Connector channel ID this call acts on. xAgent fills it in; do not invent one.","type":"string"}`

// ToolInputSchema returns the input schema of a Card tool (H2): an object
// schema with the given properties and required names, plus a
// connector_channel_id property of type string that is always required.
// Each value of properties is a JSON Schema (an object, or true/false).
// Every name in required must be a property. A connector_card_id property is
// an error: a tool never takes the Card as an argument. If properties
// already has connector_channel_id, it must have "type": "string" and is
// kept as given.
//
// The output is compact and deterministic: object keys sorted at every level, required
// listing connector_channel_id first and then the given names in order,
// duplicates removed. Errors are *Error with code invalid_packet.
func ToolInputSchema(properties map[string]json.RawMessage, required ...string) (json.RawMessage, error) {
	props := make(map[string]jsontext.Value, len(properties)+1)
	for name, v := range properties {
		if name == "" {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: a property has an empty name")
		}
		val := jsontext.Value(slices.Clone(v))
		if err := val.Compact(); err != nil {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: property %q: %s", name, jsonErrText(err))
		}
		if k := val.Kind(); k != '{' && k != 't' && k != 'f' {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: property %q is not a schema (object or boolean)", name)
		}
		props[name] = val
	}
	req := make([]string, 0, len(required)+1)
	for _, name := range required {
		if _, ok := props[name]; !ok && name != channelIDArg {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: required names %q, which is not a property", name)
		}
		if !slices.Contains(req, name) {
			req = append(req, name)
		}
	}
	top := map[string]jsontext.Value{"type": jsontext.Value(`"object"`)}
	if err := injectChannelID(top, props, req); err != nil {
		return nil, err
	}
	return marshalSorted(top)
}

// WithConnectorChannelID returns schema, an existing object schema, with the
// connector_channel_id property (type string) added to properties and to
// required (H2). A schema without "type" gets "type": "object"; any other
// type is an error, as is a connector_card_id property or a
// connector_channel_id property whose type is not string. Applying it twice
// gives the same result as once. Members it does not touch are kept; the
// output is compact with the keys of the schema and of its properties sorted.
// Errors are *Error with code invalid_packet.
func WithConnectorChannelID(schema json.RawMessage) (json.RawMessage, error) {
	var top map[string]jsontext.Value
	if err := jsonv2.Unmarshal(schema, &top); err != nil {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: not a JSON object: %s", jsonErrText(err))
	}
	if top == nil {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: null is not an object schema")
	}
	if t, ok := top["type"]; ok && string(t) != `"object"` {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, `tool input schema: "type" is %s, want "object"`, t)
	}
	top["type"] = jsontext.Value(`"object"`)
	var props map[string]jsontext.Value
	if raw, ok := top["properties"]; ok {
		if raw.Kind() != '{' {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: properties is not an object")
		}
		if err := jsonv2.Unmarshal(raw, &props); err != nil {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: properties: %s", jsonErrText(err))
		}
	}
	if props == nil {
		props = map[string]jsontext.Value{}
	}
	var req []string
	if raw, ok := top["required"]; ok {
		if err := jsonv2.Unmarshal(raw, &req); err != nil {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: required is not a list of names: %s", jsonErrText(err))
		}
	}
	if err := injectChannelID(top, props, req); err != nil {
		return nil, err
	}
	return marshalSorted(top)
}

// injectChannelID adds connector_channel_id to props and req (first, when
// absent) and stores both in top.
func injectChannelID(top, props map[string]jsontext.Value, req []string) error {
	if _, ok := props[cardIDArg]; ok {
		return imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: a tool may not take %s as an argument (H2)", cardIDArg)
	}
	if have, ok := props[channelIDArg]; ok {
		var p struct {
			Type jsontext.Value `json:"type"`
		}
		if have.Kind() != '{' || jsonv2.Unmarshal(have, &p) != nil || string(p.Type) != `"string"` {
			return imv2.Errorf(imv2.CodeInvalidPacket, `tool input schema: property %s must have "type": "string" (H2)`, channelIDArg)
		}
	} else {
		props[channelIDArg] = jsontext.Value(channelIDProperty)
	}
	if !slices.Contains(req, channelIDArg) {
		req = append([]string{channelIDArg}, req...)
	}
	p, err := marshalSorted(props)
	if err != nil {
		return err
	}
	r, err := jsonv2.Marshal(req)
	if err != nil {
		return imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: %s", jsonErrText(err))
	}
	top["properties"] = jsontext.Value(p)
	top["required"] = jsontext.Value(r)
	return nil
}

// marshalSorted encodes m compactly with the keys of every object sorted
// (RFC 8785 canonical form, so equal schemas give equal bytes). A value the
// canonical form cannot hold (a number beyond float64) keeps its spelling,
// and only the keys of m are sorted then.
func marshalSorted(m map[string]jsontext.Value) (json.RawMessage, error) {
	b, err := jsonv2.Marshal(m, jsonv2.Deterministic(true))
	if err != nil {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "tool input schema: %s", jsonErrText(err))
	}
	v := jsontext.Value(slices.Clone(b))
	if v.Canonicalize() == nil {
		return json.RawMessage(v), nil
	}
	return b, nil
}
