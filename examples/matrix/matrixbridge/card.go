package matrixbridge

import (
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// Identity of the Matrix Connector.
const (
	// CardID is the connector_card_id.
	CardID = "im.matrix"
	// Version is connector.version; bump it when the Card changes.
	Version = "0.1.0"
	// FlowID is the id of the sign-in form (auth_flows[].id).
	FlowID = "matrix_login"
	// Provider is the Descriptor's target.provider.
	Provider = "matrix"
)

// Names of the sign-in form's fields (auth.start input).
const (
	FieldHomeserver  = "homeserver"
	FieldUserID      = "user_id"
	FieldAccessToken = "access_token"
	FieldPassword    = "password"
	FieldRoom        = "room"
)

// NewCard returns the Connector Card (H1): IM target type, profile
// xagent.im.v2, one form sign-in flow, no tools (the profile's
// chat.message carries every message; no capability is declared that the
// Connector does not implement). build carries the build identity, which
// /health repeats (H4); BuildTime is required.
func NewCard(build protocol.Build) *protocol.Card {
	return &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           build,
		ConnectorCardID: CardID,
		Connector: protocol.CardInfo{
			Name:        "Matrix Connector",
			Version:     Version,
			Vendor:      "xagentkit",
			Description: "Bridge one Matrix room per channel into xAgent: room messages in, streamed replies, typing and files out.",
		},
		Supports: protocol.Supports{
			UserChannelMode: "multiple",
			TargetTypes:     []string{imv2.TargetTypeIM},
			Targets:         []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: Provider, Label: "Matrix"}},
			Profiles:        []string{imv2.ProfileIMv2},
		},
		AuthFlows: []protocol.AuthFlow{{
			ID:          FlowID,
			TargetType:  imv2.TargetTypeIM,
			Type:        "form",
			Title:       "Bind a Matrix room",
			Description: "The Connector signs in as a Matrix account (a bot account is best) and joins the room. Give an access token or a password.",
			Fields: []protocol.AuthField{
				{Name: FieldHomeserver, Label: "Homeserver URL", InputType: "text", Required: true,
					Placeholder: "https://matrix.example.org", HelpText: "The client API base URL of the homeserver."},
				{Name: FieldUserID, Label: "User ID", InputType: "text", Required: true,
					Placeholder: "@bot:example.org", HelpText: "The full Matrix ID the Connector acts as."},
				{Name: FieldAccessToken, Label: "Access token", InputType: "password", Secret: true,
					HelpText: "An access token of that account. Leave empty to sign in with the password instead."},
				{Name: FieldPassword, Label: "Password", InputType: "password", Secret: true,
					HelpText: "Used once to create a device for the Connector when no access token is given."},
				{Name: FieldRoom, Label: "Room", InputType: "text", Required: true,
					Placeholder: "!abc123:example.org or #room:example.org", HelpText: "Room ID or alias; invite the account first if the room is not public."},
			},
		}},
		Security: &protocol.Security{
			TrustLevel:     "third_party",
			APIKeyRequired: true,
			DataClasses:    []string{"message", "file", "image"},
		},
	}
}

// Skill is the primary Skill served at /skill.md (H3).
const Skill = `---
name: connector-im-matrix
description: Talk with people in a bound Matrix room.
---

# Matrix room

Each channel of this Connector is one Matrix room. Messages people write in
the room arrive as user messages; images, audio, video and files arrive as
attachments. Your replies are posted in the room: streamed replies appear as
one message that is edited as you write, and files you attach are uploaded
to the room. While you think or use a tool, the room shows you as typing.
`
