package dataplane

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// finalFrame is an xAgent → Connector final written by hand, with members
// 3.0 does not define in the envelope, the payload and its files[] item
// (nested too); fileExtra is spliced into the file item.
func finalFrame(channel, packetID, messageID, fileExtra string) string {
	return `{"schema":"xagent.connector.packet/v1","packet_id":"` + packetID + `","connector_channel_id":"` + channel + `",` +
		`"type":"chat.message","time":1.79e12,"trace":{"span":"s1","hops":[1,2]},"resource_key":"rk_env",` +
		`"payload":{"message_id":"` + messageID + `","text":"final from a newer xAgent","resource_key":"rk_main",` +
		`"render":{"format":"markdown","hints":[{"lang":"go"}]},` +
		`"files":[{"type":"image","file_ref":"file_1","width":640,"meta":{"height":480}` + fileExtra + `}]}}`
}

// TestIM_E5_I2_UnknownMembersAcceptedForbiddenRefused: over a real
// WebSocket, a final whose envelope, payload and files[] carry members
// this version does not define is accepted and shown once, with the
// unknown members readable from ChatMessage.Raw; the same final with
// files[0].session_id is rejected forbidden_field, retryable=false, and
// never shown.
func TestIM_E5_I2_UnknownMembersAcceptedForbiddenRefused(t *testing.T) {
	target := newRecTarget()
	_, url := startServer(t, func(c *ServerConfig) {
		c.NewTarget = func(string) imv2.Target { return target }
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")

	p.rawText(finalFrame(ch, "pkt_e5_1", "msg_e5_1", ""))
	ack := p.next()
	a, err := imv2.DecodeChatMessageAck(ack)
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, a.Status, "E5: unknown members are ignored, never a rejection (%s %s)", a.Code, a.Message)
	require.Equal(t, "pkt_e5_1", ack.ReplyTo)
	m := target.next(t)
	require.Equal(t, "msg_e5_1", m.MessageID)
	require.Equal(t, "final from a newer xAgent", m.Text)
	require.Len(t, m.Files, 1)
	require.Equal(t, "file_1", m.Files[0].FileRef)
	var extra struct {
		ResourceKey string `json:"resource_key"`
	}
	require.NoError(t, json.Unmarshal(m.Raw, &extra), "E5: a Connector can still read an unknown member")
	require.Equal(t, "rk_main", extra.ResourceKey)

	// A resend of the same final (same message_id): a duplicate, not shown again.
	p.rawText(finalFrame(ch, "pkt_e5_2", "msg_e5_1", ""))
	a, err = imv2.DecodeChatMessageAck(p.next())
	require.NoError(t, err)
	require.Contains(t, []imv2.AckStatus{imv2.AckAccepted, imv2.AckDuplicate}, a.Status)
	require.Equal(t, 1, target.count("msg_e5_1"), "shown once")

	// The same final with an identity field in files[0]: refused.
	p.rawText(finalFrame(ch, "pkt_e5_3", "msg_e5_3", `,"session_id":"sess_1"`))
	ack = p.next()
	a, err = imv2.DecodeChatMessageAck(ack)
	require.NoError(t, err)
	require.Equal(t, imv2.AckRejected, a.Status, "I2: files[0].session_id is refused")
	require.Equal(t, imv2.CodeForbiddenField, a.Code)
	require.False(t, a.Retryable)
	require.Contains(t, a.Message, "session_id")
	require.Equal(t, 0, target.count("msg_e5_3"))

	// Nested deeper, inside an unknown member of the file: refused too.
	p.rawText(finalFrame(ch, "pkt_e5_4", "msg_e5_4", `,"ext":{"user_id":"u_1"}`))
	a, err = imv2.DecodeChatMessageAck(p.next())
	require.NoError(t, err)
	require.Equal(t, imv2.AckRejected, a.Status)
	require.Equal(t, imv2.CodeForbiddenField, a.Code)
	require.Equal(t, 0, target.count("msg_e5_4"))
}

// TestServer_E5_W4_CommonProtocolUnknownMembers: Common Protocol payloads
// and envelopes with members 3.0 does not define are read, not refused:
// a 4.3 hello with extra members is admitted, a channel.open and a ping
// with extra members are answered.
func TestServer_E5_W4_CommonProtocolUnknownMembers(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_h","request_id":"req_h","type":"connector.hello","time":1790000000000,"trace":{"id":"t"},` +
		`"payload":{"connector_card_id":"` + testCardID + `","protocol_version":"4.3","supported_profiles":["xagent.im.v2"],"resource_key":"rk","capabilities":{"multi_resource":true}}}`)
	ack := p.next()
	require.Equal(t, protocol.TypeConnectorHelloAck, ack.Type, "%+v", ack.Error)
	var h protocol.ConnectorHelloAck
	require.NoError(t, ack.DecodePayload(&h))
	require.Equal(t, "3.0", h.ProtocolVersion)

	p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_o","request_id":"req_o","type":"channel.open","time":1.79e12,"resource_key":"rk","payload":{"resource_key":"rk","hints":[1]}}`)
	open := p.next()
	require.Equal(t, protocol.TypeChannelOpenAck, open.Type, "%+v", open.Error)
	require.Equal(t, "req_o", open.RequestID)

	p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_p","request_id":"req_p","type":"ping","time":1790000000000.0,"x":{"y":[null]},"payload":{"z":1}}`)
	pong := p.next()
	require.Equal(t, protocol.TypePong, pong.Type)
	require.Equal(t, "req_p", pong.RequestID)
}
