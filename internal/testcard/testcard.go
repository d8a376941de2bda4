// Package testcard builds the smallest valid Card of an IM Connector for
// the SDK's tests, so a test states only what it changes.
package testcard

import (
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// IM returns a valid Card with connector_card_id "im."+provider, declaring
// xagent.im.v2 for the target type im with one target of that provider,
// and no tools.
func IM(provider, label string) *protocol.Card {
	return &protocol.Card{
		Schema: protocol.CardSchema, ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "1.0.0", BuildTime: "2026-11-30T00:00:00Z"},
		ConnectorCardID: "im." + provider,
		Connector:       protocol.CardInfo{Name: label + " test Connector", Version: "1.0.0"},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: provider, Label: label}},
			Profiles:    []string{imv2.ProfileIMv2},
		},
	}
}
