package protocol

import (
	"encoding/json"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/xagentkit/imv2"
)

// Validation of the Connector Card (H1, H2, P1, P8) and of the Connection
// Descriptor (H5, P1, P2). Both return the first broken rule as an *Error
// with code invalid_packet, its message naming the member and the rule ID,
// so a Connector author sees at start-up what xAgent would refuse later.

// targetTypes are the target types a Card or Descriptor may name (H1, H5).
var targetTypes = []string{"im", "email", "calendar", "ticket", "device"}

// descriptorStatuses are the values of Descriptor connection.status (H5).
var descriptorStatuses = []string{
	StatusCreated, StatusAuthenticating, StatusConnected, StatusDegraded,
	StatusOffline, StatusExpired, StatusRevoked, StatusError,
}

// toolStatuses are the values of Descriptor tools[].status (H5).
var toolStatuses = []string{"available", "unavailable", "denied_by_target", "requires_reauth", "not_supported"}

// permissionStates are the values of Descriptor tools[].target_permission_state (H5).
var permissionStates = []string{"unknown", "granted", "denied", "requires_reauth"}

// trustLevels are the values of Card security.trust_level (H1).
var trustLevels = []string{"unknown", "builtin", "verified", "third_party", "local"}

// MaxToolIDBytes bounds a Card tools[].tool_id (H2).
const MaxToolIDBytes = 256

func cardErr(format string, args ...any) *imv2.Error {
	return imv2.Errorf(imv2.CodeInvalidPacket, "connector card: "+format, args...)
}

func descErr(format string, args ...any) *imv2.Error {
	return imv2.Errorf(imv2.CodeInvalidPacket, "connection descriptor: "+format, args...)
}

// Validate checks the Card before it is served (H1, H2, P1, P8): the fixed
// schema and protocol version, the required identity and build members,
// non-empty unique target types from the enum, non-empty unique profiles,
// each profile of the default catalog declared only with a target type it
// allows, tools with a safe unique tool_id and an input schema that
// requires connector_channel_id, and well-formed auth flows. It returns the
// first problem as an *Error with code invalid_packet.
//
// Validate is the Connector author's check, stricter than xAgent's
// admission (Admit): it also holds the Card to the Common Protocol's
// recommendations and field tables (supports.targets[], related_skill_ids
// naming this Connector's Skill, auth_flows, security).
func (c *Card) Validate() error { return c.check(true) }

// Admit checks a fetched Card as xAgent admits it: Common Protocol §4.1's
// hard-validation list only — schema, protocol_version, connector_card_id,
// connector.name and connector.version, supports.target_types (non-empty,
// known values) and supports.profiles (non-empty, each catalog profile
// next to a target type it allows, P1), supports.user_channel_mode, tools
// with a unique valid tool_id, a declared profile and an input schema
// that requires connector_channel_id. What Common Protocol §4.1 calls guidance or a
// recommendation is not a refusal: related_skill_ids of any name, a
// supports.targets[] entry whose target_type is not in target_types (xAgent
// falls back to the Connector's name for it), auth flows, UI and security
// details.
func (c *Card) Admit() error { return c.check(false) }

// check is Validate (strict) or Admit.
func (c *Card) check(strict bool) error {
	if c == nil {
		return cardErr("nil card")
	}
	switch {
	case c.Schema != CardSchema:
		return cardErr("schema is %q, want %q (H1)", c.Schema, CardSchema)
	case c.ProtocolVersion != ProtocolVersion:
		return cardErr("protocol_version is %q, want %q (H1)", c.ProtocolVersion, ProtocolVersion)
	case strict && blank(c.Build.BuildTime):
		return cardErr("build.build_time is empty (H1)")
	case blank(c.ConnectorCardID):
		return cardErr("connector_card_id is empty (H1)")
	case blank(c.Connector.Name):
		return cardErr("connector.name is empty (H1)")
	case blank(c.Connector.Version):
		return cardErr("connector.version is empty (H1)")
	}
	if err := c.validateSupports(strict); err != nil {
		return err
	}
	for i := range c.Tools {
		if err := c.validateTool(i, strict); err != nil {
			return err
		}
	}
	if !strict {
		return nil
	}
	if err := c.validateAuthFlows(); err != nil {
		return err
	}
	if c.UI != nil && c.UI.LoginFlow != nil {
		for i, s := range c.UI.LoginFlow.Steps {
			if s.Type == "" {
				return cardErr("ui.login_flow.steps[%d].type is empty (H1)", i)
			}
		}
	}
	if c.Security != nil && c.Security.TrustLevel != "" && !slices.Contains(trustLevels, c.Security.TrustLevel) {
		return cardErr("security.trust_level %q is not one of %v (H1)", c.Security.TrustLevel, trustLevels)
	}
	return nil
}

func (c *Card) validateSupports(strict bool) error {
	s := &c.Supports
	switch s.UserChannelMode {
	case "", "single", "multiple":
	default:
		return cardErr("supports.user_channel_mode %q is not single or multiple (H1)", s.UserChannelMode)
	}
	if err := checkNameList("supports.target_types", s.TargetTypes, targetTypes, cardErr); err != nil {
		return err
	}
	if err := checkNameList("supports.profiles", s.Profiles, nil, cardErr); err != nil {
		return err
	}
	for i, t := range s.Targets {
		if !strict {
			break // recommendations (Common Protocol §4.1): xAgent falls back to the Connector's name
		}
		switch {
		case !slices.Contains(s.TargetTypes, t.TargetType):
			return cardErr("supports.targets[%d].target_type %q is not in supports.target_types (H1)", i, t.TargetType)
		case t.Provider == "":
			return cardErr("supports.targets[%d].provider is empty (H1)", i)
		case t.Label == "":
			return cardErr("supports.targets[%d].label is empty (H1)", i)
		}
	}
	// P1: a profile the SDK knows may be declared only next to a target
	// type it allows. Profiles outside the catalog are not judged here.
	catalog := imv2.DefaultCatalog()
	for _, id := range s.Profiles {
		entry, ok := catalog[id]
		if !ok {
			continue
		}
		if !slices.ContainsFunc(entry.TargetTypes, func(tt string) bool { return slices.Contains(s.TargetTypes, tt) }) {
			return cardErr("profile %q needs target type %v in supports.target_types, which has %v (P1)", id, entry.TargetTypes, s.TargetTypes)
		}
	}
	return nil
}

// checkNameList checks a non-empty list of unique, non-empty strings, each
// in enum when enum is not nil.
func checkNameList(what string, list, enum []string, mk func(string, ...any) *imv2.Error) error {
	if len(list) == 0 {
		return mk("%s is empty (H1)", what)
	}
	for i, v := range list {
		if v == "" {
			return mk("%s[%d] is empty (H1)", what, i)
		}
		if enum != nil && !slices.Contains(enum, v) {
			return mk("%s[%d] %q is not one of %v (H1)", what, i, v, enum)
		}
		if slices.Contains(list[:i], v) {
			return mk("%s[%d] %q appears twice (H1)", what, i, v)
		}
	}
	return nil
}

func (c *Card) validateTool(i int, strict bool) error {
	t := &c.Tools[i]
	if err := checkToolID(t.ToolID); err != nil {
		return cardErr("tools[%d].tool_id: %s (H2)", i, err.Message)
	}
	for j := range i {
		if c.Tools[j].ToolID == t.ToolID {
			return cardErr("tools[%d].tool_id %q appears twice (H2)", i, t.ToolID)
		}
	}
	if t.Profile != "" && !slices.Contains(c.Supports.Profiles, t.Profile) {
		return cardErr("tools[%d] (%s) names profile %q, which supports.profiles does not declare (P8)", i, t.ToolID, t.Profile)
	}
	if err := CheckToolInputSchema(t.InputSchema); err != nil {
		return cardErr("tools[%d] (%s).input_schema: %s (H2)", i, t.ToolID, err.Message)
	}
	if !strict {
		return nil // related_skill_ids are workflow guidance (Common Protocol §4.1)
	}
	if len(t.OutputSchema) > 0 && jsontext.Value(t.OutputSchema).Kind() != '{' {
		return cardErr("tools[%d] (%s).output_schema is not an object (H2)", i, t.ToolID)
	}
	for j, id := range t.RelatedSkillIDs {
		if err := checkSkillID(c.ConnectorCardID, id); err != nil {
			return cardErr("tools[%d] (%s).related_skill_ids[%d] %s (Common Protocol §4.2)", i, t.ToolID, j, err.Message)
		}
	}
	return nil
}

// checkToolID enforces H2: 1..256 characters of [A-Za-z0-9_.-].
func checkToolID(id string) *imv2.Error {
	if id == "" {
		return imv2.Errorf(imv2.CodeInvalidPacket, "is empty")
	}
	if len(id) > MaxToolIDBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "is %d characters, over %d", len(id), MaxToolIDBytes)
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '.' || b == '-') {
			return imv2.Errorf(imv2.CodeInvalidPacket, "%q has a character outside [A-Za-z0-9_.-]", id)
		}
	}
	return nil
}

// inputSchemaHead is the part of a tool input schema H2 constrains.
type inputSchemaHead struct {
	Type       jsontext.Value            `json:"type"`
	Properties map[string]jsontext.Value `json:"properties"`
	Required   []string                  `json:"required"`
}

// CheckToolInputSchema reports whether schema is a valid Card tool input
// schema (H2): a JSON object with "type": "object", a "properties" member
// whose connector_channel_id has "type": "string", a "required" list that
// names connector_channel_id, and no connector_card_id property (the Card
// is implied by the Connector; a tool must not take it as an argument).
// Build schemas with ToolInputSchema or WithConnectorChannelID so this
// holds by construction. The error has code invalid_packet.
func CheckToolInputSchema(schema json.RawMessage) *imv2.Error {
	if len(schema) == 0 {
		return imv2.Errorf(imv2.CodeInvalidPacket, "is missing")
	}
	var h inputSchemaHead
	if err := jsonv2.Unmarshal(schema, &h); err != nil {
		return imv2.Errorf(imv2.CodeInvalidPacket, "%s", jsonErrText(err))
	}
	if string(h.Type) != `"object"` {
		return imv2.Errorf(imv2.CodeInvalidPacket, `"type" must be "object"`)
	}
	if _, ok := h.Properties[cardIDArg]; ok {
		return imv2.Errorf(imv2.CodeInvalidPacket, "property %q is not allowed", cardIDArg)
	}
	ch, ok := h.Properties[channelIDArg]
	if !ok {
		return imv2.Errorf(imv2.CodeInvalidPacket, "properties.%s is missing", channelIDArg)
	}
	var prop struct {
		Type jsontext.Value `json:"type"`
	}
	if ch.Kind() != '{' || jsonv2.Unmarshal(ch, &prop) != nil || string(prop.Type) != `"string"` {
		return imv2.Errorf(imv2.CodeInvalidPacket, `properties.%s must have "type": "string"`, channelIDArg)
	}
	if !slices.Contains(h.Required, channelIDArg) {
		return imv2.Errorf(imv2.CodeInvalidPacket, "required does not list %s", channelIDArg)
	}
	return nil
}

func (c *Card) validateAuthFlows() error {
	for i := range c.AuthFlows {
		f := &c.AuthFlows[i]
		if f.ID == "" {
			return cardErr("auth_flows[%d].id is empty (H1)", i)
		}
		for j := range i {
			if c.AuthFlows[j].ID == f.ID {
				return cardErr("auth_flows[%d].id %q appears twice (H1)", i, f.ID)
			}
		}
		if f.TargetType == "" {
			return cardErr("auth_flows[%d] (%s).target_type is required (H1)", i, f.ID)
		}
		if f.Title == "" {
			return cardErr("auth_flows[%d] (%s).title is required: the user-facing sign-in title (H1)", i, f.ID)
		}
		if !slices.Contains(targetTypes, f.TargetType) {
			return cardErr("auth_flows[%d] (%s).target_type %q is not one of %v (H1)", i, f.ID, f.TargetType, targetTypes)
		}
		switch f.Type {
		case "qr_login":
		case "form":
			if len(f.Fields) == 0 {
				return cardErr("auth_flows[%d] (%s) is a form with no fields (H1)", i, f.ID)
			}
		default:
			return cardErr("auth_flows[%d] (%s).type %q is not qr_login or form (H1)", i, f.ID, f.Type)
		}
		for k, fd := range f.Fields {
			switch {
			case fd.Name == "":
				return cardErr("auth_flows[%d] (%s).fields[%d].name is empty (H1)", i, f.ID, k)
			case fd.Label == "":
				return cardErr("auth_flows[%d] (%s).fields[%d] (%s).label is empty (H1)", i, f.ID, k, fd.Name)
			case fd.InputType != "text" && fd.InputType != "password":
				return cardErr("auth_flows[%d] (%s).fields[%d] (%s).input_type %q is not text or password (H1)", i, f.ID, k, fd.Name, fd.InputType)
			case fd.DefaultValue != "" && (fd.Secret || fd.InputType == "password"):
				// A default for a secret would publish the secret in the Card.
				return cardErr("auth_flows[%d] (%s).fields[%d] (%s) is sensitive and may not have a default_value (H1)", i, f.ID, k, fd.Name)
			}
			for _, prev := range f.Fields[:k] {
				if prev.Name == fd.Name {
					return cardErr("auth_flows[%d] (%s).fields[%d].name %q appears twice (H1)", i, f.ID, k, fd.Name)
				}
			}
		}
		for _, s := range []struct {
			name string
			v    json.RawMessage
		}{{"config_schema", f.ConfigSchema}, {"ui_schema", f.UISchema}} {
			if len(s.v) > 0 && jsontext.Value(s.v).Kind() != '{' {
				return cardErr("auth_flows[%d] (%s).%s is not an object (H1)", i, f.ID, s.name)
			}
		}
	}
	return nil
}

// Validate checks the Descriptor (H5, P1, P2): the fixed schema; every
// connection member non-empty, target_type and status from their enums;
// profiles non-empty and unique, each catalog profile only with a target
// type it allows; target.provider non-empty; tools with a unique tool_id and
// a known status. When card is not nil it also checks the cross rules: the
// Card's connector_card_id, a target type and profiles the Card declares
// (P2), and no tool the Card does not list (H5). card itself is not
// validated; call card.Validate for that. The error has code invalid_packet.
func (d *Descriptor) Validate(card *Card) error {
	if d == nil {
		return descErr("nil descriptor")
	}
	c := &d.Connection
	switch {
	case d.Schema != DescriptorSchema:
		return descErr("schema is %q, want %q (H5)", d.Schema, DescriptorSchema)
	case c.LegacyProfile != "":
		return descErr("connection.profile is the legacy v1 member; a %s Descriptor has connection.profiles only (Common Protocol §12)", DescriptorSchema)
	case c.ConnectorCardID == "":
		return descErr("connection.connector_card_id is empty (H5)")
	case c.ConnectorID == "":
		return descErr("connection.connector_id is empty (H5)")
	case c.ConnectorChannelID == "":
		return descErr("connection.connector_channel_id is empty (H5)")
	case !slices.Contains(targetTypes, c.TargetType):
		return descErr("connection.target_type %q is not one of %v (H5)", c.TargetType, targetTypes)
	case !slices.Contains(descriptorStatuses, c.Status):
		return descErr("connection.status %q is not one of %v (H5)", c.Status, descriptorStatuses)
	case d.Target.Provider == "":
		return descErr("target.provider is empty (H5)")
	}
	if len(c.Profiles) == 0 {
		return descErr("connection.profiles is empty (P2)")
	}
	catalog := imv2.DefaultCatalog()
	for i, id := range c.Profiles {
		if id == "" {
			return descErr("connection.profiles[%d] is empty (P2)", i)
		}
		if slices.Contains(c.Profiles[:i], id) {
			return descErr("connection.profiles[%d] %q appears twice (P2)", i, id)
		}
		if entry, ok := catalog[id]; ok && !slices.Contains(entry.TargetTypes, c.TargetType) {
			return descErr("profile %q is not allowed for target_type %q, only %v (P1)", id, c.TargetType, entry.TargetTypes)
		}
		if card != nil && !slices.Contains(card.Supports.Profiles, id) {
			return descErr("connection.profiles[%d] %q is not declared in the Card's supports.profiles (P2)", i, id)
		}
	}
	if card != nil {
		if c.ConnectorCardID != card.ConnectorCardID {
			return descErr("connection.connector_card_id %q is not the Card's %q (P2)", c.ConnectorCardID, card.ConnectorCardID)
		}
		if !slices.Contains(card.Supports.TargetTypes, c.TargetType) {
			return descErr("connection.target_type %q is not in the Card's supports.target_types (P2)", c.TargetType)
		}
	}
	for i, t := range d.Tools {
		switch {
		case t.ToolID == "":
			return descErr("tools[%d].tool_id is empty (H5)", i)
		case !slices.Contains(toolStatuses, t.Status):
			return descErr("tools[%d] (%s).status %q is not one of %v (H5)", i, t.ToolID, t.Status, toolStatuses)
		case t.TargetPermissionState != "" && !slices.Contains(permissionStates, t.TargetPermissionState):
			return descErr("tools[%d] (%s).target_permission_state %q is not one of %v (H5)", i, t.ToolID, t.TargetPermissionState, permissionStates)
		}
		for _, prev := range d.Tools[:i] {
			if prev.ToolID == t.ToolID {
				return descErr("tools[%d].tool_id %q appears twice (H5)", i, t.ToolID)
			}
		}
		if card != nil && !slices.ContainsFunc(card.Tools, func(ct Tool) bool { return ct.ToolID == t.ToolID }) {
			return descErr("tools[%d].tool_id %q is not a tool of the Card (H5)", i, t.ToolID)
		}
	}
	return nil
}

// DecodeCard parses a Connector Card (the body of GET /connector-card.json)
// with the SDK's strict codec, where duplicate member names and invalid
// UTF-8 are errors and unknown members are ignored, and validates it. The
// error is an *Error with code invalid_packet.
func DecodeCard(data []byte) (*Card, error) {
	c := new(Card)
	if err := jsonv2.Unmarshal(data, c); err != nil {
		return nil, cardErr("%s", jsonErrText(err))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// AdmitCard parses a fetched Card like DecodeCard and checks it with
// Admit, xAgent's admission (Common Protocol §4.1's hard validation only).
func AdmitCard(data []byte) (*Card, error) {
	c := new(Card)
	if err := jsonv2.Unmarshal(data, c); err != nil {
		return nil, cardErr("%s", jsonErrText(err))
	}
	if err := c.Admit(); err != nil {
		return nil, err
	}
	return c, nil
}

// AdmitDescriptor parses a Descriptor xAgent received, normalizes a
// legacy xagent.connection/v1 one (Normalize, Common Protocol §12) and
// validates the result against card like DecodeDescriptor.
func AdmitDescriptor(data []byte, card *Card) (*Descriptor, error) {
	d := new(Descriptor)
	if err := jsonv2.Unmarshal(data, d); err != nil {
		return nil, descErr("%s", jsonErrText(err))
	}
	d.Normalize()
	if err := d.Validate(card); err != nil {
		return nil, err
	}
	return d, nil
}

// DecodeDescriptor parses a Connection Descriptor like DecodeCard and
// validates it against card (nil skips the cross rules, see
// Descriptor.Validate). The error is an *Error with code invalid_packet.
func DecodeDescriptor(data []byte, card *Card) (*Descriptor, error) {
	d := new(Descriptor)
	if err := jsonv2.Unmarshal(data, d); err != nil {
		return nil, descErr("%s", jsonErrText(err))
	}
	if err := d.Validate(card); err != nil {
		return nil, err
	}
	return d, nil
}

// blank reports whether s is empty or only white space: a name nobody can
// read is as missing as an empty one.
func blank(s string) bool { return strings.TrimSpace(s) == "" }
