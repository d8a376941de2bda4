package dataplane

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

// The readings of issue #30, each over a real loopback WebSocket: where
// the profile speaks the SDK is exact, where it is silent it reads as a
// peer built from the text alone would expect.

// TestIM_S1_PendingTTLOffKeepsMessageUntilAck: with Options.PendingTTL
// negative, a user message no ack answered for four hours is still pending
// (profile §9 removes it only on a terminal ack) and the late ack
// delivers it. Before, a negative TTL meant the 1 h default and the
// message failed with expired.
func TestIM_S1_PendingTTLOffKeepsMessageUntilAck(t *testing.T) {
	clk := fakeclock.New(t0)
	failed := make(chan *imv2.Error, 1)
	delivered := make(chan string, 1)
	srv, url := startServer(t, func(c *ServerConfig) {
		c.Options = &imv2.Options{
			Clock:       clk,
			PendingTTL:  -1,
			AckTimeout:  3 * time.Hour, // one transmission: the ack below answers it
			OnFailed:    func(_ string, _ imv2.ChatMessage, err *imv2.Error) { failed <- err },
			OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) { delivered <- m.MessageID },
		}
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")
	sch := srv.Channel(ch)
	require.NotNil(t, sch)

	id, err := sch.Send(ctxWait(t), imv2.ChatMessage{Text: "are you there?"})
	require.NoError(t, err)
	msg := p.next()
	require.Equal(t, imv2.TypeChatMessage, msg.Type)

	clk.Advance(4 * time.Hour) // timers fire in Advance: the ack timeout at 3 h resends, an expiry would be reported now
	select {
	case err := <-failed:
		t.Fatalf("S1: a message with the age limit off failed: %v", err)
	default:
	}
	pending, err := sch.Pending(ctxWait(t))
	require.NoError(t, err)
	require.Len(t, pending, 1, "S1: still pending after four hours")

	ack, err := imv2.NewAck(msg, id, imv2.AckAccepted, nil)
	require.NoError(t, err)
	p.write(ack)
	require.Equal(t, id, recv(t, delivered), "S1: the late ack delivers it")
}

// TestClient_P2_K1_DescriptorProfileOutsideCardNotEnabled: a Connector
// whose Card declares only xagent.im.v1 while its Descriptor names
// xagent.im.v2 gets no im.v2 channel from the Client: a Descriptor may
// declare only the Card's profiles (profile §2). Before, the Client took the
// Descriptor's word, opened the channel and Send worked.
func TestClient_P2_K1_DescriptorProfileOutsideCardNotEnabled(t *testing.T) {
	cfg := ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }}
	srv, err := NewServer(cfg)
	require.NoError(t, err)
	v1 := testCard()
	v1.Supports.Profiles = []string{"xagent.im.v1"}
	v1.Tools = nil // the IM tools name xagent.im.v2 (P8)
	hs := httptest.NewServer(withCard(v1, srv))
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	cli, _, events := dialClient(t, url, nil)
	recv(t, events)
	ch, err := cli.OpenChannel(ctxWait(t), "")
	require.Error(t, err, "P2: the Descriptor's xagent.im.v2 is not in the Card")
	require.Empty(t, ch)
	require.Equal(t, imv2.CodeChannelUnavailable, imv2.AsError(err, "").Code)
}

// TestIM_A3_LongAckTextReadTolerantly: a rejection whose message is over
// 1,024 bytes and whose code is over 256 is still the rejection it says:
// retryable=false ends the message with that (cut) code, no resend
// follows and no error packet answers the ack (profile §7 sets no size).
// Before, the ack was invalid_packet and the message was resent.
func TestIM_A3_LongAckTextReadTolerantly(t *testing.T) {
	failed := make(chan *imv2.Error, 1)
	srv, url := startServer(t, func(c *ServerConfig) {
		c.Options = &imv2.Options{OnFailed: func(_ string, _ imv2.ChatMessage, err *imv2.Error) { failed <- err }}
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")
	sch := srv.Channel(ch)
	id, err := sch.Send(ctxWait(t), imv2.ChatMessage{Text: "hello"})
	require.NoError(t, err)
	msg := p.next()

	code := strings.Repeat("c", 300)
	text := strings.Repeat("m", 2000)
	p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_long_ack","reply_to":"` + msg.PacketID +
		`","connector_channel_id":"` + ch + `","type":"chat.message.ack","time":1790000000000,"payload":{"message_id":"` + id +
		`","status":"rejected","code":"` + code + `","message":"` + text + `","retryable":false}}`)
	got := recv(t, failed)
	require.Equal(t, imv2.Code(code[:256]), got.Code, "A3: the code cut to 256 bytes")
	require.Len(t, got.Message, 1024, "A3: the message cut to 1,024 bytes")
	require.False(t, got.Retryable)
	pong := p.call("ping", "", nil)
	require.Equal(t, "pong", pong.Type, "A3: no error packet answered the ack, no resend came before the pong")
	pending, err := sch.Pending(ctxWait(t))
	require.NoError(t, err)
	require.Empty(t, pending, "S3: a retryable=false rejection ends the message")
}

// TestIM_M8_E5_FileNamesOnlyWhereProfilePutsThem: over a real WebSocket, a
// final with quote.content, reply.body and files[0].metadata.data (members
// the SDK does not know) is accepted and shown; the same names in a
// files[] item or at the payload's top level, and an identity name at any
// depth, are refused forbidden_field.
func TestIM_M8_E5_FileNamesOnlyWhereProfilePutsThem(t *testing.T) {
	target := newRecTarget()
	_, url := startServer(t, func(c *ServerConfig) {
		c.NewTarget = func(string) imv2.Target { return target }
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")
	frame := func(pid, mid, payloadExtra, fileExtra string) string {
		return `{"schema":"xagent.connector.packet/v1","packet_id":"` + pid + `","connector_channel_id":"` + ch +
			`","type":"chat.message","time":1790000000000,"payload":{"message_id":"` + mid + `","text":"t"` + payloadExtra +
			`,"files":[{"type":"image","file_ref":"file_1"` + fileExtra + `}]}}`
	}
	p.rawText(frame("pkt_m8_1", "msg_m8_1", `,"quote":{"message_id":"q","content":"quoted"},"reply":{"body":"b"}`, `,"metadata":{"data":{"w":1}}`))
	a, err := imv2.DecodeChatMessageAck(p.next())
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, a.Status, "M8: names inside members the SDK does not know pass (%s %s)", a.Code, a.Message)
	require.Equal(t, "msg_m8_1", target.next(t).MessageID)

	for i, c := range []struct{ payload, file string }{
		{"", `,"content":"aGVsbG8="`},
		{`,"body":"raw"`, ""},
		{`,"quote":{"user_id":"u"}`, ""},
	} {
		mid := "msg_m8_bad_" + string(rune('a'+i))
		p.rawText(frame("pkt_m8_bad_"+string(rune('a'+i)), mid, c.payload, c.file))
		a, err := imv2.DecodeChatMessageAck(p.next())
		require.NoError(t, err)
		require.Equal(t, imv2.AckRejected, a.Status, "case %d", i)
		require.Equal(t, imv2.CodeForbiddenField, a.Code, "case %d: %s", i, a.Message)
		require.Zero(t, target.count(mid))
	}
}

// activityTarget records the activity it was asked to show.
type activityTarget struct {
	*recTarget
	shownActivity chan imv2.ChatActivity
}

func (a *activityTarget) SetActivity(_ context.Context, _ string, act imv2.ChatActivity) error {
	a.shownActivity <- act
	return nil
}

// TestIM_C3_ToolNameIsAnyTextUpTo256Bytes: chat.activity with tool_name
// "Web Search" or "github/search_issues" is shown, no error packet: the
// profile bounds tool_name by size only (profile §8). Before, each got a
// forbidden_field error packet.
func TestIM_C3_ToolNameIsAnyTextUpTo256Bytes(t *testing.T) {
	target := &activityTarget{recTarget: newRecTarget(), shownActivity: make(chan imv2.ChatActivity, 8)}
	_, url := startServer(t, func(c *ServerConfig) {
		c.NewTarget = func(string) imv2.Target { return target }
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")
	for _, name := range []string{"Web Search", "github/search_issues"} {
		p.send(imv2.TypeChatActivity, ch, imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: name})
		pong := p.call("ping", "", nil)
		require.Equal(t, "pong", pong.Type, "C3: %q answered %+v", name, pong.Error)
		require.Equal(t, name, recv(t, target.shownActivity).ToolName)
	}
}

// TestIM_S6_ResignedURLIsSameMessage: a final resent with a freshly signed
// download_url and a new expires_at is the same message: duplicate, not
// message_id_conflict, and shown once (profile §9 names the text and the
// file list). Before, the resend was rejected message_id_conflict,
// retryable=false.
func TestIM_S6_ResignedURLIsSameMessage(t *testing.T) {
	target := newRecTarget()
	_, url := startServer(t, func(c *ServerConfig) {
		c.NewTarget = func(string) imv2.Target { return target }
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")
	send := func(pid, sig string, expires int) *imv2.ChatMessageAck {
		p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"` + pid + `","connector_channel_id":"` + ch +
			`","type":"chat.message","time":1790000000000,"payload":{"message_id":"msg_s6","text":"see file",` +
			`"files":[{"type":"file","file_ref":"file_1","filename":"a.txt","byte_size":3,"download_url":"/files/refs/file_1?sig=` + sig +
			`","expires_at":` + string(rune('0'+expires)) + `}]}}`)
		a, err := imv2.DecodeChatMessageAck(p.next())
		require.NoError(t, err)
		return a
	}
	require.Equal(t, imv2.AckAccepted, send("pkt_s6_1", "one", 1).Status)
	target.next(t)
	a := send("pkt_s6_2", "two", 2)
	require.Equal(t, imv2.AckDuplicate, a.Status, "S6: a new URL and expiry are the same message (%s %s)", a.Code, a.Message)
	require.Equal(t, 1, target.count("msg_s6"))

	// Another file list is another message: still a conflict.
	p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_s6_3","connector_channel_id":"` + ch +
		`","type":"chat.message","time":1790000000000,"payload":{"message_id":"msg_s6","text":"see file",` +
		`"files":[{"type":"file","file_ref":"file_2","filename":"a.txt","byte_size":3}]}}`)
	a, err := imv2.DecodeChatMessageAck(p.next())
	require.NoError(t, err)
	require.Equal(t, imv2.AckRejected, a.Status)
	require.Equal(t, imv2.CodeMessageIDConflict, a.Code)
}
