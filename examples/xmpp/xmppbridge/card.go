package xmppbridge

import (
	_ "embed"
	"encoding/json"

	"github.com/xagentkit/imv2/protocol"
)

// Identity of the XMPP Connector; the rest of the Card is card.json.
const (
	// CardID is the connector_card_id.
	CardID = "im.xmpp"
	// Version is connector.version; bump it when the Card changes.
	Version = "0.1.0"
)

//go:embed card.json
var cardJSON []byte

// Skill is the primary Skill served at /skill.md (H3).
//
//go:embed skill.md
var Skill string

// NewCard returns the Connector Card (H1): IM target type, profile
// xagent.im.v2, no auth flows (every channel is bound to the configured
// conversation), no tools, an API key required. build carries the build
// identity, which /health repeats (H4); BuildTime is required.
func NewCard(build protocol.Build) *protocol.Card {
	var c protocol.Card
	if err := json.Unmarshal(cardJSON, &c); err != nil {
		panic(err) // an embedded constant, checked by TestNewCard_H1_Valid
	}
	c.Build, c.Connector.Version = build, Version
	return &c
}
