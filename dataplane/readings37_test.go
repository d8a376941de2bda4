package dataplane

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// vectorPacket reads a golden vector of the repository's testdata and
// routes it to channel under a fresh packet_id, so one vector can be sent
// on any channel.
func vectorPacket(t *testing.T, file, channel string) *imv2.Packet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", file))
	require.NoError(t, err)
	p, err := imv2.DecodePacket(data)
	require.NoError(t, err, file)
	p.PacketID = imv2.NewPacketID()
	p.ConnectorChannelID = channel
	return p
}

// TestTolerant_PatchLevelHelloAdmitted (issue 37, W4): a hello whose
// protocol_version has a patch level ("4.4.0", "3.0.1", "3.0.0", the
// vectors of protocol/testdata) is admitted over a real connection and
// compared by major and minor: the ack answers this Connector's 3.0. A
// version below 3.0, with a patch level or not, is still refused. Before
// issue 37 ParseVersion took "major.minor" only and each of the three was
// refused invalid_packet.
func TestTolerant_PatchLevelHelloAdmitted(t *testing.T) {
	_, url := startServer(t, nil)
	for _, v := range []string{"4.4.0", "3.0.1", "3.0.0"} {
		pkt := vectorPacket(t, "protocol/testdata/vectors/cp/connector.hello-patch-"+v+".json", "")
		var h protocol.ConnectorHello
		require.NoError(t, pkt.DecodePayload(&h))
		require.Equal(t, v, h.ProtocolVersion)
		h.ConnectorCardID = testCardID // the vectors name im.wechat
		p := dialPeer(t, url, nil)
		ans := p.call(protocol.TypeConnectorHello, "", h)
		require.Equal(t, protocol.TypeConnectorHelloAck, ans.Type, "%s: %+v", v, ans.Error)
		var ack protocol.ConnectorHelloAck
		require.NoError(t, ans.DecodePayload(&ack))
		require.Equal(t, protocol.ProtocolVersion, ack.ProtocolVersion)
		ch, _ := p.open("")
		require.NotEmpty(t, ch, v)
	}
	for _, v := range []string{"2.9.9", "2.9"} {
		h := goodHello("")
		h.ProtocolVersion = v
		ans := dialPeer(t, url, nil).call(protocol.TypeConnectorHello, "", h)
		expectError(t, ans, imv2.CodeInvalidPacket)
		require.Contains(t, ans.Error.Message, "below 3.0")
	}
}

// TestTolerant_FilenamesAndActivityShownOnce (issue 37, M5, M8, C4, E5):
// the finals of the filename vectors ("Q3/Q4 chart.png", "a\b.png", a
// 100-character Chinese name of 292 bytes, 255 characters) are accepted
// over a real connection and posted once each, the filename kept as sent;
// the activity vector with usage: {input, output} token counts is shown
// (typing) once. Before issue 37 the first two were refused
// forbidden_field, the long names invalid_packet (a 255-byte bound), and
// the activity forbidden_field (input and output read as tool detail at
// any depth), each for good. The refusals that stay are checked too: a
// local path, 256 characters, tool input as the activity's own member.
func TestTolerant_FilenamesAndActivityShownOnce(t *testing.T) {
	target := &activityTarget{recTarget: newRecTarget(), shownActivity: make(chan imv2.ChatActivity, 8)}
	_, url := startServer(t, func(c *ServerConfig) {
		c.NewTarget = func(string) imv2.Target { return target }
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")

	for _, file := range []string{"ok-filename-slash.json", "ok-filename-backslash.json", "ok-filename-cjk-100.json", "ok-filename-255-chars.json"} {
		pkt := vectorPacket(t, "testdata/vectors/im/chat.message/"+file, ch)
		var want imv2.ChatMessage
		require.NoError(t, json.Unmarshal(pkt.Payload, &want))
		want.MessageID = file // one message per vector
		pkt, err := imv2.NewChatMessage(ch, imv2.ToConnector, want)
		require.NoError(t, err, file)
		p.write(pkt)
		ack := mustAck(t, p.next())
		require.Equal(t, imv2.AckAccepted, ack.Status, "%s: %+v", file, ack)
		got := target.next(t)
		require.Equal(t, file, got.MessageID)
		require.Equal(t, want.Files[0].Filename, got.Files[0].Filename, "%s: the filename as sent", file)
		p.write(pkt) // the resend is a duplicate, not a second post
		require.Equal(t, imv2.AckDuplicate, mustAck(t, p.next()).Status)
		require.Equal(t, 1, target.count(file), "%s shown once", file)
	}
	for file, code := range map[string]imv2.Code{"bad-filename-absolute.json": imv2.CodeForbiddenField, "bad-filename-path.json": imv2.CodeForbiddenField, "bad-filename-256-chars.json": imv2.CodeInvalidPacket} {
		p.write(vectorPacket(t, "testdata/vectors/im/chat.message/"+file, ch))
		ack := mustAck(t, p.next())
		require.Equal(t, imv2.AckRejected, ack.Status, file)
		require.Equal(t, code, ack.Code, file)
	}

	p.write(vectorPacket(t, "testdata/vectors/im/chat.activity/ok-usage-counts.json", ch))
	require.Equal(t, imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "web_search"}, recv(t, target.shownActivity))
	p.write(vectorPacket(t, "testdata/vectors/im/chat.activity/bad-input.json", ch))
	expectError(t, p.next(), imv2.CodeForbiddenField) // only the refused one is answered
	require.Equal(t, "pong", p.call("ping", "", nil).Type)
	require.Empty(t, target.shownActivity, "shown once")
}
