package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// TestSkillName_H3 uses the examples table of Common Protocol §4.2.
func TestSkillName_H3(t *testing.T) {
	for id, want := range map[string]string{
		"im.feishu": "connector-im-feishu", "im.telegram": "connector-im-telegram",
		"im.wechat": "connector-im-wechat", "device.adb": "connector-device-adb", "im.my_chat": "connector-im-my-chat",
	} {
		require.Equal(t, want, protocol.SkillName(id))
	}
}

func TestSkillHeaderName_H3(t *testing.T) {
	name, err := protocol.SkillHeaderName([]byte("---\nname: connector-im-wechat\ndescription: \"x: y\"\n---\n\n# WeChat\n"))
	require.NoError(t, err)
	require.Equal(t, "connector-im-wechat", name)
	name, err = protocol.SkillHeaderName([]byte("\xef\xbb\xbf---\r\nname: 'connector-im-a'\r\n---\r\n"))
	require.NoError(t, err)
	require.Equal(t, "connector-im-a", name)
	for _, bad := range []string{"# no header\n", "---\nname: x\n", "---\ndescription: x\n---\n", "---\nname: [\n---\n", ""} {
		_, err := protocol.SkillHeaderName([]byte(bad))
		require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeInvalidPacket}, "%q", bad)
	}
}

func skillCard(related ...string) *protocol.Card {
	c := &protocol.Card{ConnectorCardID: "im.wechat"}
	if related != nil {
		c.Tools = []protocol.Tool{{ToolID: "wechat_message_send", RelatedSkillIDs: related}}
	}
	return c
}

// TestCard_CheckSkill_H3: the /skill.md header name and the Card's skill
// IDs match exactly (Common Protocol §4.2); a disagreement names both.
func TestCard_CheckSkill_H3(t *testing.T) {
	good := []byte("---\nname: connector-im-wechat\n---\n# WeChat\n")
	require.NoError(t, skillCard("connector-im-wechat").CheckSkill(good))
	require.NoError(t, skillCard("connector-im-wechat-file").CheckSkill(nil), "an additional Skill is not served by /skill.md")
	require.NoError(t, skillCard().CheckSkill(nil))

	err := skillCard("connector-im-wechat").CheckSkill([]byte("---\nname: connector-im-telegram\n---\n"))
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeInvalidPacket})
	require.ErrorContains(t, err, `"connector-im-telegram"`)
	require.ErrorContains(t, err, `"connector-im-wechat"`)
	require.ErrorContains(t, err, `"im.wechat"`)

	err = skillCard().CheckSkill([]byte("---\nname: Connector-IM-WeChat\n---\n"))
	require.ErrorContains(t, err, "hyphen-case")
	err = skillCard().CheckSkill([]byte("# WeChat, no header\n"))
	require.ErrorContains(t, err, "no header")
	err = skillCard("connector-im-wechat").CheckSkill(nil)
	require.ErrorContains(t, err, "no /skill.md")
}

// FuzzSkillHeaderName: any bytes give a name or an invalid_packet error,
// never a panic; a name found is the one a rebuilt header yields.
func FuzzSkillHeaderName(f *testing.F) {
	f.Add([]byte("---\nname: connector-im-wechat\n---\n# x\n"))
	f.Add([]byte("---\r\nname: \"a: b\"\r\n---\r\n"))
	f.Add([]byte("# none\n"))
	f.Fuzz(func(t *testing.T, md []byte) {
		name, err := protocol.SkillHeaderName(md)
		if err != nil {
			require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeInvalidPacket})
			return
		}
		require.NotEmpty(t, name)
	})
}
