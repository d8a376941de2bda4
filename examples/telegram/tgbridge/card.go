package tgbridge

import (
	_ "embed"
	"encoding/json"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// Identity of the Telegram Connector; the rest of the Card is card.json.
const (
	// CardID is the connector_card_id.
	CardID = "im.telegram"
	// Version is connector.version; bump it when the Card changes.
	Version = "0.1.0"
	// PairFlow is the ID of the Card's auth flow that binds a channel to
	// the chat where the pairing code is sent (Bridge.Start).
	PairFlow = "telegram_pair"
)

//go:embed card.json
var cardJSON []byte

// Skill is the primary Skill served at /skill.md (H3).
//
//go:embed skill.md
var Skill string

// NewCard returns the Connector Card (H1). With pairing the Card has one
// auth flow, PairFlow; without (Config.Chat) none, every channel being
// bound to the one chat.
func NewCard(build protocol.Build, pairing bool) *protocol.Card {
	var c protocol.Card
	if err := json.Unmarshal(cardJSON, &c); err != nil {
		panic(err) // an embedded constant, checked by TestNewCard_H1_Valid
	}
	c.Build, c.Connector.Version = build, Version
	if pairing {
		c.AuthFlows = []protocol.AuthFlow{{ID: PairFlow, TargetType: imv2.TargetTypeIM, Type: "qr_login",
			Title: "Connect a Telegram chat",
			Description: "Open the link (or send the /start command shown) in the private chat or group " +
				"with the bot; that chat becomes this channel's conversation."}}
	}
	return &c
}
