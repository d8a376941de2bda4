package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// minimalCard is the smallest Card H1 accepts.
func minimalCard() *protocol.Card {
	return &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{BuildTime: "2611300000"},
		ConnectorCardID: "im.console",
		Connector:       protocol.CardInfo{Name: "Console", Version: "0.1.0"},
		Supports:        protocol.Supports{TargetTypes: []string{"im"}, Profiles: []string{imv2.ProfileIMv2}},
	}
}

func TestCardValidate_H1_H2_BuiltWithHelper(t *testing.T) {
	c := minimalCard()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	schema, err := protocol.ToolInputSchema(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Tools = []protocol.Tool{{ToolID: "console.send", Profile: imv2.ProfileIMv2, InputSchema: schema}}
	if err := c.Validate(); err != nil {
		t.Fatalf("a tool built with ToolInputSchema: %v", err)
	}
	d := &protocol.Descriptor{
		Schema: protocol.DescriptorSchema,
		Connection: protocol.Connection{ConnectorCardID: "im.console", ConnectorID: "conn_1", ConnectorChannelID: "cch_1",
			TargetType: "im", Profiles: []string{imv2.ProfileIMv2}, Status: protocol.StatusConnected},
		Target: protocol.DescriptorTarget{Provider: "console"},
		Tools:  []protocol.ToolState{{ToolID: "console.send", Status: "available"}},
	}
	if err := d.Validate(c); err != nil {
		t.Fatal(err)
	}
	d.Connection.TargetType = "email"
	if err := d.Validate(nil); !errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}) || !strings.Contains(err.Error(), "P1") {
		t.Errorf("P1 on a descriptor without card: %v", err)
	}
	d.Connection.TargetType = "im"
	c.Supports.TargetTypes = []string{"email", "im"}
	d2 := *d
	d2.Connection.Profiles = []string{"xagent.email.v1"}
	d2.Connection.TargetType = "email"
	c.Supports.Profiles = append(c.Supports.Profiles, "xagent.email.v1")
	if err := d2.Validate(c); err != nil {
		t.Errorf("a profile outside the catalog, declared by the Card: %v", err)
	}
	c.Supports.TargetTypes = []string{"im"}
	if err := d2.Validate(c); err == nil || !strings.Contains(err.Error(), "P2") {
		t.Errorf("P2: target_type the Card does not support: %v", err)
	}
}

func TestCardValidate_H1_NilAndMessages(t *testing.T) {
	var c *protocol.Card
	if err := c.Validate(); !errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}) {
		t.Errorf("nil card: %v", err)
	}
	var d *protocol.Descriptor
	if err := d.Validate(nil); !errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}) {
		t.Errorf("nil descriptor: %v", err)
	}
	bad := minimalCard()
	bad.Supports.Targets = []protocol.SupportedTarget{{TargetType: "im", Provider: "console"}}
	err := bad.Validate()
	var e *imv2.Error
	if !errors.As(err, &e) || e.Code != imv2.CodeInvalidPacket || !strings.Contains(e.Message, "supports.targets[0].label") {
		t.Errorf("the message must name the member: %v", err)
	}
	bad = minimalCard()
	bad.UI = &protocol.CardUI{LoginFlow: &protocol.LoginFlow{Steps: []protocol.LoginStep{{}}}}
	if err := bad.Validate(); err == nil {
		t.Error("a login step without type passed")
	}
	bad = minimalCard()
	bad.AuthFlows = []protocol.AuthFlow{{ID: "f", Type: "qr_login", ConfigSchema: []byte(`[]`)}}
	if err := bad.Validate(); err == nil {
		t.Error("config_schema that is not an object passed")
	}
}
