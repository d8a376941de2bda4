package protocol_test

import (
	"encoding/json"
	"fmt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// A Card tool's input schema gets connector_channel_id declared and
// required by the helper, never by hand (H2).
func ExampleToolInputSchema() {
	schema, err := protocol.ToolInputSchema(map[string]json.RawMessage{
		"text": json.RawMessage(`{"type":"string","description":"Text to send."}`),
	}, "text")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(schema))

	card := protocol.Card{
		Schema: protocol.CardSchema, ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{BuildTime: "2611300000"},
		ConnectorCardID: "im.console",
		Connector:       protocol.CardInfo{Name: "Console IM", Version: "0.1.0"},
		Supports:        protocol.Supports{TargetTypes: []string{"im"}, Profiles: []string{imv2.ProfileIMv2}},
		Tools:           []protocol.Tool{{ToolID: "console_message_send", Profile: imv2.ProfileIMv2, InputSchema: schema}},
	}
	fmt.Println(card.Validate())
	// Output:
	// {"properties":{"connector_channel_id":{"description":"The user-level Connector channel ID this call acts on. xAgent fills it in; do not invent one.","type":"string"},"text":{"description":"Text to send.","type":"string"}},"required":["connector_channel_id","text"],"type":"object"}
	// <nil>
}

// NewCard fills in what every IM Connector's Card says alike; the rest is
// a plain struct to set before serving it.
func ExampleNewCard() {
	card := protocol.NewCard("im.pretend", "Pretend chat", "1.0.0",
		protocol.SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "pretend", Label: "Pretend chat"})
	fmt.Println(card.Validate() == nil, card.Supports.TargetTypes, card.Supports.Profiles)
	// Output: true [im] [xagent.im.v2]
}
