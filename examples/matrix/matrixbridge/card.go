package matrixbridge

import (
	_ "embed"
	"encoding/json"

	"github.com/xagentkit/imv2/protocol"
)

// Identity of the Matrix Connector; the rest of the Card is card.json.
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

//go:embed card.json
var cardJSON []byte

// Skill is the primary Skill served at /skill.md (H3).
//
//go:embed skill.md
var Skill string

// NewCard returns the Connector Card (H1): IM target type, profile
// xagent.im.v2, one form sign-in flow (FlowID), no tools, an API key
// required. build carries the build identity, which /health repeats (H4);
// BuildTime is required.
func NewCard(build protocol.Build) *protocol.Card {
	var c protocol.Card
	if err := json.Unmarshal(cardJSON, &c); err != nil {
		panic(err) // an embedded constant, checked by TestNewCard_H1_Valid
	}
	c.Build, c.Connector.Version = build, Version
	return &c
}
