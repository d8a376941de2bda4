package protocol

import (
	"bytes"
	"strings"

	"github.com/xagentkit/imv2"
	"go.yaml.in/yaml/v3"
)

// Connector Skill naming (Common Protocol 3.0 §4.2, "Skill naming"): the
// name in the SKILL.md header is the protocol-visible Skill name; the
// primary Skill is "connector-" + the connector_card_id with '.' and '_'
// as '-', an additional Skill appends "-<purpose>"; names are lowercase
// hyphen-case; the header name and the Card's tools[].related_skill_ids
// match exactly.

// SkillName returns the primary Skill name of a Card ID: "im.wechat" →
// "connector-im-wechat".
func SkillName(connectorCardID string) string {
	return "connector-" + strings.NewReplacer(".", "-", "_", "-").Replace(connectorCardID)
}

// checkSkillName enforces lowercase hyphen-case: [a-z0-9] runs joined by
// single hyphens.
func checkSkillName(name string) *imv2.Error {
	if name == "" {
		return imv2.Errorf(imv2.CodeInvalidPacket, "is empty")
	}
	if len(name) > imv2.MaxIDBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "is over %d bytes", imv2.MaxIDBytes)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		switch {
		case 'a' <= b && b <= 'z', '0' <= b && b <= '9':
		case b == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return imv2.Errorf(imv2.CodeInvalidPacket, "%q is not lowercase hyphen-case ([a-z0-9] joined by single hyphens)", name)
		}
	}
	return nil
}

// checkSkillID checks one related_skill_id of a Card against the Card ID:
// well-formed, and the primary Skill or an additional one
// ("<primary>-<purpose>").
func checkSkillID(cardID, id string) *imv2.Error {
	if err := checkSkillName(id); err != nil {
		return err
	}
	primary := SkillName(cardID)
	if id != primary && !strings.HasPrefix(id, primary+"-") {
		return imv2.Errorf(imv2.CodeInvalidPacket, "%q is not this Connector's Skill: the primary is %q (from connector_card_id %q), an additional one %q-<purpose>", id, primary, cardID, primary)
	}
	return nil
}

// SkillHeaderName returns the name of a SKILL.md header: the YAML front
// matter between a first line "---" and the next "---" line.
func SkillHeaderName(md []byte) (string, error) {
	md = bytes.TrimPrefix(md, []byte("\xef\xbb\xbf"))
	rest, ok := cutLine(md, "---")
	if !ok {
		return "", imv2.Errorf(imv2.CodeInvalidPacket, "skill: no header (a first line \"---\" opening YAML front matter with name)")
	}
	var front []byte
	for len(rest) > 0 {
		line, tail, _ := bytes.Cut(rest, []byte("\n"))
		if string(bytes.TrimRight(line, " \t\r")) == "---" {
			var h struct {
				Name string `yaml:"name"`
			}
			if err := yaml.Unmarshal(front, &h); err != nil {
				return "", imv2.Errorf(imv2.CodeInvalidPacket, "skill: header is not YAML: %v", err)
			}
			if h.Name == "" {
				return "", imv2.Errorf(imv2.CodeInvalidPacket, "skill: header has no name")
			}
			return h.Name, nil
		}
		front = append(append(front, line...), '\n')
		rest = tail
	}
	return "", imv2.Errorf(imv2.CodeInvalidPacket, "skill: header is not closed by a \"---\" line")
}

// cutLine reports whether b starts with the line want and returns the rest.
func cutLine(b []byte, want string) ([]byte, bool) {
	line, rest, _ := bytes.Cut(b, []byte("\n"))
	return rest, string(bytes.TrimRight(line, " \t\r")) == want
}

// CheckSkill checks the primary Skill a Connector serves at /skill.md
// against its Card (Common Protocol §4.2): md's header name is
// well-formed and is exactly SkillName(c.ConnectorCardID), and every
// tools[].related_skill_ids entry resolves — to that Skill, or to an
// additional Skill "<primary>-<purpose>" (the SDK serves only the primary,
// so of an additional one only the name is checked). md nil means no
// /skill.md: a related_skill_id naming the primary Skill then resolves to
// nothing. The Card itself is checked by Validate.
func (c *Card) CheckSkill(md []byte) error {
	primary := SkillName(c.ConnectorCardID)
	if md != nil {
		name, err := SkillHeaderName(md)
		if err != nil {
			return err
		}
		if e := checkSkillName(name); e != nil {
			return imv2.Errorf(imv2.CodeInvalidPacket, "skill: header name %s", e.Message)
		}
		if name != primary {
			return imv2.Errorf(imv2.CodeInvalidPacket, "skill: /skill.md header name %q does not match the Card: connector_card_id %q names its primary Skill %q", name, c.ConnectorCardID, primary)
		}
	}
	for i, t := range c.Tools {
		for j, id := range t.RelatedSkillIDs {
			if id == primary && md == nil {
				return imv2.Errorf(imv2.CodeInvalidPacket, "skill: tools[%d] (%s).related_skill_ids[%d] %q names the primary Skill, but no /skill.md is served", i, t.ToolID, j, id)
			}
		}
	}
	return nil
}
