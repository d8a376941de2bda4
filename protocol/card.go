package protocol

import "encoding/json"

// CardSchema is the Connector Card's `schema` value (H1).
const CardSchema = "xagent.connector/v1"

// Card is the Connector Card served at GET /connector-card.json (H1): what
// the Connector is and what it statically supports. It holds no base URL,
// key, token or identity of a real user.
type Card struct {
	Schema          string     `json:"schema"`
	ProtocolVersion string     `json:"protocol_version"`
	Build           Build      `json:"build"`
	ConnectorCardID string     `json:"connector_card_id"`
	Connector       CardInfo   `json:"connector"`
	Supports        Supports   `json:"supports"`
	Tools           []Tool     `json:"tools,omitempty"`
	AuthFlows       []AuthFlow `json:"auth_flows,omitempty"`
	UI              *CardUI    `json:"ui,omitempty"`
	Security        *Security  `json:"security,omitempty"`
}

// Build identifies the Connector build; /health returns the same values (H4).
type Build struct {
	Version   string `json:"version,omitempty"`
	GitTag    string `json:"git_tag,omitempty"`
	GitRev    string `json:"git_rev,omitempty"`
	BuildTime string `json:"build_time"`
}

// CardInfo is the Card's `connector` member.
type CardInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Vendor      string `json:"vendor,omitempty"`
	Description string `json:"description,omitempty"`
}

// Supports is the Card's static support (P2).
type Supports struct {
	// UserChannelMode is "single" (default) or "multiple".
	UserChannelMode string            `json:"user_channel_mode,omitempty"`
	TargetTypes     []string          `json:"target_types"`
	Targets         []SupportedTarget `json:"targets,omitempty"`
	Profiles        []string          `json:"profiles"`
}

// SupportedTarget is one entry of supports.targets.
type SupportedTarget struct {
	TargetType  string `json:"target_type"`
	Provider    string `json:"provider"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Tool is one Card tool (H2, P8). Build InputSchema with ToolInputSchema so
// connector_channel_id is declared and required.
type Tool struct {
	ToolID          string          `json:"tool_id"`
	Profile         string          `json:"profile,omitempty"`
	Title           string          `json:"title,omitempty"`
	Description     string          `json:"description,omitempty"`
	RelatedSkillIDs []string        `json:"related_skill_ids,omitempty"`
	InputSchema     json.RawMessage `json:"input_schema"`
	OutputSchema    json.RawMessage `json:"output_schema,omitempty"`
}

// AuthFlow is one Card auth flow, started by auth.start.
type AuthFlow struct {
	ID           string          `json:"id"`
	TargetType   string          `json:"target_type"` // required
	Type         string          `json:"type"`        // "qr_login" or "form"
	Title        string          `json:"title"`       // required: the user-facing title
	Description  string          `json:"description,omitempty"`
	Fields       []AuthField     `json:"fields,omitempty"`
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
	UISchema     json.RawMessage `json:"ui_schema,omitempty"`
}

// AuthField is one input of a form auth flow.
type AuthField struct {
	Name         string `json:"name"`
	Label        string `json:"label"`
	InputType    string `json:"input_type"` // "text" or "password"
	Required     bool   `json:"required,omitempty"`
	Placeholder  string `json:"placeholder,omitempty"`
	HelpText     string `json:"help_text,omitempty"`
	Secret       bool   `json:"secret,omitempty"`
	DefaultValue string `json:"default_value,omitempty"`
}

// CardUI is the Card's `ui` member.
type CardUI struct {
	LoginFlow *LoginFlow `json:"login_flow,omitempty"`
}

// LoginFlow pairs request and response packet types of a sign-in UI.
type LoginFlow struct {
	FlowID string      `json:"flow_id,omitempty"`
	Steps  []LoginStep `json:"steps,omitempty"`
}

// LoginStep is one step of a LoginFlow.
type LoginStep struct {
	Type         string `json:"type"`
	RequestType  string `json:"request_type,omitempty"`
	ResponseType string `json:"response_type,omitempty"`
}

// Security is the Card's `security` member.
type Security struct {
	TrustLevel        string   `json:"trust_level,omitempty"`
	APIKeyRequired    bool     `json:"api_key_required,omitempty"`
	RequiresSignature bool     `json:"requires_signature,omitempty"`
	DataClasses       []string `json:"data_classes,omitempty"`
}

// DescriptorSchema is the Connection Descriptor's `schema` value (H5).
const DescriptorSchema = "xagent.connection/v2"

// LegacyDescriptorSchema is the `schema` of a legacy Descriptor, which
// names one profile in connection.profile; xAgent accepts it and
// normalizes it (Normalize, Common Protocol §12). A current Connector
// never emits it.
const LegacyDescriptorSchema = "xagent.connection/v1"

// Descriptor is the Connection Descriptor of one channel (H5): what this
// channel actually enabled (P2) and its state.
type Descriptor struct {
	Schema     string           `json:"schema"`
	Connection Connection       `json:"connection"`
	Target     DescriptorTarget `json:"target"`
	Tools      []ToolState      `json:"tools,omitempty"`
}

// Connection is the Descriptor's `connection` member.
type Connection struct {
	ConnectorCardID    string   `json:"connector_card_id"`
	ConnectorID        string   `json:"connector_id"`
	ConnectorChannelID string   `json:"connector_channel_id"`
	TargetType         string   `json:"target_type"`
	Profiles           []string `json:"profiles"`
	Status             string   `json:"status"`
	// LegacyProfile is a legacy v1 Descriptor's singular
	// connection.profile, read so Normalize can move it into Profiles
	// (Common Protocol §12). Validate refuses it set: a current Connector
	// writes Profiles only.
	LegacyProfile string `json:"profile,omitempty"`
}

// Normalize turns a legacy xagent.connection/v1 Descriptor into the
// current model (Common Protocol §12): its singular connection.profile
// becomes Profiles (unless Profiles is already set) and the schema
// becomes DescriptorSchema. In any other Descriptor a connection.profile
// member is ignored, as unknown members are.
func (d *Descriptor) Normalize() {
	if d == nil {
		return
	}
	if d.Schema == LegacyDescriptorSchema {
		if len(d.Connection.Profiles) == 0 && d.Connection.LegacyProfile != "" {
			d.Connection.Profiles = []string{d.Connection.LegacyProfile}
		}
		d.Schema = DescriptorSchema
	}
	// In a current Descriptor the member is unknown, and unknown members
	// are ignored.
	d.Connection.LegacyProfile = ""
}

// Descriptor connection.status values.
const (
	StatusCreated        = "created"
	StatusAuthenticating = "authenticating"
	StatusConnected      = "connected"
	StatusDegraded       = "degraded"
	StatusOffline        = "offline"
	StatusExpired        = "expired"
	StatusRevoked        = "revoked"
	StatusError          = "error"
)

// DescriptorTarget is the Descriptor's `target` member: display-level and
// redacted only.
type DescriptorTarget struct {
	Provider    string `json:"provider"`
	Label       string `json:"label,omitempty"`
	DisplayName string `json:"display_name"`
	AccountHint string `json:"account_hint,omitempty"`
}

// ToolState is one entry of the Descriptor's tools: a Card tool's state on
// this channel.
type ToolState struct {
	ToolID                string `json:"tool_id"`
	Status                string `json:"status"`
	TargetPermissionState string `json:"target_permission_state,omitempty"`
	Reason                string `json:"reason,omitempty"`
}
