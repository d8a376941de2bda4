package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

func TestServer_W4_W5_W7_W8_FullHandshake(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)

	connID := p.hello("")
	require.True(t, strings.HasPrefix(connID, "conn_"))

	id, d := p.open("")
	require.True(t, strings.HasPrefix(id, "cch_"), "W5: a new channel gets a cch_ id")
	require.Equal(t, protocol.DescriptorSchema, d.Schema)
	require.Equal(t, protocol.Connection{
		ConnectorCardID:    testCardID,
		ConnectorID:        connID,
		ConnectorChannelID: id,
		TargetType:         imv2.TargetTypeIM,
		Profiles:           []string{imv2.ProfileIMv2},
		Status:             protocol.StatusCreated,
	}, d.Connection)
	require.Equal(t, protocol.DescriptorTarget{Provider: "testim", Label: "Test IM", DisplayName: "Test IM"}, d.Target)

	ans := p.call(protocol.TypeDescriptorGet, id, nil)
	require.Equal(t, protocol.TypeDescriptorGetAck, ans.Type)
	require.Equal(t, id, ans.ConnectorChannelID)
	var dp protocol.DescriptorPayload
	require.NoError(t, ans.DecodePayload(&dp))
	require.Equal(t, d, dp.ConnectionDescriptor, "W7: descriptor.get returns the same descriptor")

	pong := p.call(protocol.TypePing, "", nil)
	require.Equal(t, protocol.TypePong, pong.Type, "W8")
}

func TestServer_W3_HelloRequired(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	for _, typ := range []string{protocol.TypeChannelOpen, protocol.TypeDescriptorGet, protocol.TypeAuthStart, protocol.TypeToolInvoke, "no.such.type"} {
		expectError(t, p.call(typ, "", nil), protocol.CodeHelloRequired)
	}
	expectError(t, p.call(imv2.TypeChatMessage, "cch_x", json.RawMessage(`{"message_id":"m","text":"hi"}`)), protocol.CodeHelloRequired)
	// ping is allowed before hello and the connection stays open.
	require.Equal(t, protocol.TypePong, p.call(protocol.TypePing, "", nil).Type)
	p.hello("")
	p.open("")
}

func TestServer_W4_HelloValidation(t *testing.T) {
	_, url := startServer(t, nil)
	for _, tc := range []struct {
		name    string
		payload string
		code    imv2.Code
		mention string
	}{
		{"card_mismatch", `{"connector_card_id":"im.other","protocol_version":"3.0","supported_profiles":["xagent.im.v2"]}`, protocol.CodeConnectorCardIDMismatch, "im.other"},
		{"card_missing", `{"protocol_version":"3.0","supported_profiles":["xagent.im.v2"]}`, protocol.CodeConnectorCardIDMismatch, "connector_card_id"},
		{"version_missing", `{"connector_card_id":"im.test","supported_profiles":["xagent.im.v2"]}`, imv2.CodeInvalidPacket, "protocol_version is missing"},
		{"version_low", `{"connector_card_id":"im.test","protocol_version":"1.0","supported_profiles":["xagent.im.v2"]}`, imv2.CodeInvalidPacket, "1.0 is below 3.0"},
		{"P3_profiles_missing", `{"connector_card_id":"im.test","protocol_version":"3.0"}`, imv2.CodeInvalidPacket, "supported_profiles is missing"},
		{"P3_profiles_null", `{"connector_card_id":"im.test","protocol_version":"3.0","supported_profiles":null}`, imv2.CodeInvalidPacket, "supported_profiles"},
		{"payload_bad_type", `{"connector_card_id":7}`, imv2.CodeInvalidPacket, "connector.hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dialPeer(t, url, nil)
			ans := p.call(protocol.TypeConnectorHello, "", json.RawMessage(tc.payload))
			expectError(t, ans, tc.code)
			require.Contains(t, ans.Error.Message, tc.mention)
			// The hello did not complete, and the connection stays usable.
			expectError(t, p.call(protocol.TypeChannelOpen, "", nil), protocol.CodeHelloRequired)
			p.hello("")
		})
	}
}

func TestServer_W4_ConnectorIDIssuedAndReused(t *testing.T) {
	srv, url := startServer(t, nil)
	a := dialPeer(t, url, nil)
	id := a.hello("")
	expectError(t, a.call(protocol.TypeConnectorHello, "", goodHello(id)), imv2.CodeInvalidPacket) // hello twice
	c := dialPeer(t, url, nil)
	other := c.hello("conn_unknown")
	require.NotEqual(t, "conn_unknown", other, "an unknown connector_id gets a new one")
	require.NotEqual(t, id, other)
	require.NoError(t, a.conn.Close()) // one holder per connector_id: reused once a's connection ended
	waitDetached(t, srv, id)
	b := dialPeer(t, url, nil)
	require.Equal(t, id, b.hello(id), "a known connector_id is reused")
}

func TestServer_W5_OpenNewReuseUnknown(t *testing.T) {
	srv, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	p.hello("")
	id, _ := p.open("")
	again, _ := p.open(id)
	require.Equal(t, id, again, "W5: a known channel is reused")
	other, _ := p.open("cch_unknown")
	require.NotEqual(t, "cch_unknown", other, "W5: an unknown channel gets a new ID")
	require.NotEqual(t, id, other)
	require.ElementsMatch(t, []string{id, other}, srv.ChannelIDs())
	require.NotNil(t, srv.Channel(id))
	require.True(t, srv.IsOpen(id))
}

func TestServer_W5_P3_NoCommonProfile(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	h := goodHello("")
	h.SupportedProfiles = []string{"xagent.im.v1"}
	require.Equal(t, protocol.TypeConnectorHelloAck, p.call(protocol.TypeConnectorHello, "", h).Type)
	ans := p.call(protocol.TypeChannelOpen, "", nil)
	expectError(t, ans, imv2.CodeChannelUnavailable)
	require.Contains(t, ans.Error.Message, "no profile in common")
}

func TestServer_W6_CloseStopsRoutingKeepsState(t *testing.T) {
	srv, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	p.hello("")
	id, _ := p.open("")

	ans := p.call(protocol.TypeChannelClose, id, nil)
	require.Equal(t, protocol.TypeChannelCloseAck, ans.Type)
	var st protocol.StatusOK
	require.NoError(t, ans.DecodePayload(&st))
	require.Equal(t, "ok", st.Status)
	require.False(t, srv.IsOpen(id))

	// Inbound routing stopped (X2) …
	expectError(t, p.call(imv2.TypeChatMessage, id, json.RawMessage(`{"message_id":"m1","text":"hi"}`)), imv2.CodeChannelNotOpen)
	expectError(t, p.call(protocol.TypeChannelClose, id, nil), imv2.CodeChannelNotOpen)
	// … and outbound too: a user message sent now stays pending.
	ch := srv.Channel(id)
	require.NotNil(t, ch, "W6: the channel's state is kept")
	msgID, err := ch.Send(ctxWait(t), imv2.ChatMessage{Text: "while closed"})
	require.NoError(t, err)
	require.Equal(t, protocol.TypePong, p.call(protocol.TypePing, "", nil).Type, "nothing was sent for the closed channel")

	// Reopen: the ack first, then the pending message (S10).
	again, _ := p.open(id)
	require.Equal(t, id, again)
	got := p.next()
	require.Equal(t, imv2.TypeChatMessage, got.Type)
	m, err := imv2.DecodeChatMessage(got, imv2.ToXAgent)
	require.NoError(t, err)
	require.Equal(t, msgID, m.MessageID)
}

func TestServer_W7_DescriptorGetAndPush(t *testing.T) {
	var mu sync.Mutex
	status := protocol.StatusCreated
	srv, url := startServer(t, func(c *ServerConfig) {
		c.Describe = func(_ context.Context, _ string) ChannelInfo {
			mu.Lock()
			defer mu.Unlock()
			return ChannelInfo{Status: status, DisplayName: "Alice's bot", Tools: []protocol.ToolState{
				{ToolID: "test_send", Status: "available"},
				{ToolID: "not_in_card", Status: "available"},
			}}
		}
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	id, d := p.open("")
	require.Equal(t, "Alice's bot", d.Target.DisplayName)
	require.Equal(t, []protocol.ToolState{{ToolID: "test_send", Status: "available"}}, d.Tools, "a tool outside the Card never appears")

	mu.Lock()
	status = protocol.StatusConnected
	mu.Unlock()
	require.NoError(t, srv.Push(ctxWait(t), id))
	push := p.next()
	require.Equal(t, protocol.TypeDescriptorPush, push.Type)
	require.Equal(t, id, push.ConnectorChannelID)
	var dp protocol.DescriptorPayload
	require.NoError(t, push.DecodePayload(&dp))
	require.Equal(t, protocol.StatusConnected, dp.ConnectionDescriptor.Connection.Status)

	expectError(t, p.call(protocol.TypeDescriptorGet, "", nil), imv2.CodeChannelIDRequired)
	expectError(t, p.call(protocol.TypeDescriptorGet, "cch_nope", nil), imv2.CodeChannelNotOpen)
	p.call(protocol.TypeChannelClose, id, nil)
	require.ErrorIs(t, srv.Push(ctxWait(t), id), &imv2.Error{Code: imv2.CodeChannelNotOpen})
	_, err := srv.Descriptor(ctxWait(t), "cch_nope")
	require.Error(t, err)
}

func TestServer_W8_PingPongBeforeAndAfterHello(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	for i := 0; i < 2; i++ {
		req := p.send(protocol.TypePing, "", nil)
		ans := p.next()
		require.Equal(t, protocol.TypePong, ans.Type)
		require.Equal(t, req.RequestID, ans.RequestID, "W8: pong carries the ping's request_id")
		require.Equal(t, req.PacketID, ans.ReplyTo)
		if i == 0 {
			p.hello("")
		}
	}
}

// TestServer_W9_EveryAnswerEchoes checks request_id and reply_to on every
// kind of answer; peer.call asserts both.
func TestServer_W9_EveryAnswerEchoes(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) { c.Tools = ToolFunc(echoTool) })
	p := dialPeer(t, url, nil)
	p.call(protocol.TypeChannelOpen, "", nil) // error hello_required
	p.call(protocol.TypePing, "", nil)
	p.hello("")
	id, _ := p.open("")
	p.call(protocol.TypeDescriptorGet, id, nil)
	p.call(protocol.TypeToolInvoke, id, protocol.ToolInvoke{ToolID: "test_send"})
	p.call("no.such.type", "", nil)
	p.call(protocol.TypeChannelClose, id, nil)
}

func TestServer_W10_I1_X2_ErrorCodes(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	p.hello("")
	id, _ := p.open("")
	msg := json.RawMessage(`{"message_id":"m1","text":"hi"}`)
	for _, tc := range []struct {
		name, typ, channel string
		payload            any
		code               imv2.Code
	}{
		{"I1_chat_without_channel", imv2.TypeChatMessage, "", msg, imv2.CodeChannelIDRequired},
		{"X2_chat_unknown_channel", imv2.TypeChatMessage, "cch_nope", msg, imv2.CodeChannelNotOpen},
		{"X2_delta_unknown_channel", imv2.TypeChatMessageDelta, "cch_nope", json.RawMessage(`{"message_id":"m","sequence":1,"text":"a"}`), imv2.CodeChannelNotOpen},
		{"I1_close_without_channel", protocol.TypeChannelClose, "", nil, imv2.CodeChannelIDRequired},
		{"unsupported_type", "message.push", "", nil, imv2.CodeUnsupportedPacket},
		{"auth_without_handler", protocol.TypeAuthStart, id, protocol.AuthStart{FlowID: "test_qr"}, imv2.CodeUnsupportedPacket},
		{"tool_without_handler", protocol.TypeToolInvoke, id, protocol.ToolInvoke{ToolID: "test_send"}, imv2.CodeUnsupportedPacket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectError(t, p.call(tc.typ, tc.channel, tc.payload), tc.code)
		})
	}
}

func echoTool(_ context.Context, channelID string, req protocol.ToolInvoke) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"channel": channelID, "tool": req.ToolID})
}

// recAuth records auth calls and answers them.
type recAuth struct {
	mu    sync.Mutex
	calls []string
}

func (a *recAuth) rec(s string) {
	a.mu.Lock()
	a.calls = append(a.calls, s)
	a.mu.Unlock()
}

func (a *recAuth) Start(_ context.Context, ch string, req protocol.AuthStart) (*protocol.AuthAck, error) {
	a.rec("start " + ch + " " + req.FlowID)
	return &protocol.AuthAck{AuthSessionID: "auth_1", Status: protocol.AuthPending, QRCodeText: "qr://x", PollIntervalMillis: 2000}, nil
}

func (a *recAuth) Status(_ context.Context, ch string, req protocol.AuthStatusRequest) (*protocol.AuthAck, error) {
	a.rec("status " + ch + " " + req.AuthSessionID)
	if req.AuthSessionID != "auth_1" {
		return nil, imv2.Errorf(protocol.CodeAuthSessionNotFound, "no auth session %q", req.AuthSessionID)
	}
	return &protocol.AuthAck{Status: protocol.AuthAuthenticated}, nil
}

func (a *recAuth) Cancel(_ context.Context, ch string, req protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	a.rec("cancel " + ch + " " + req.AuthSessionID)
	return &protocol.AuthCancelAck{Status: "ignored"}, nil
}

func (a *recAuth) Logout(_ context.Context, ch string) (*protocol.StatusOK, error) {
	a.rec("logout " + ch)
	return nil, nil
}

func TestServer_W12_AuthAndToolRouted(t *testing.T) {
	auth := &recAuth{}
	_, url := startServer(t, func(c *ServerConfig) {
		c.Auth = auth
		c.Tools = ToolFunc(func(ctx context.Context, ch string, req protocol.ToolInvoke) (json.RawMessage, error) {
			switch string(req.Arguments) {
			case `{"fail":"plain"}`:
				return nil, errors.New("platform said: token=abc123 invalid")
			case `{"fail":"coded"}`:
				return nil, imv2.Errorf(protocol.CodeConnectionNotAuthenticated, "sign in first")
			}
			return echoTool(ctx, ch, req)
		})
	})
	p := dialPeer(t, url, nil)
	p.hello("")

	// Before channel.open: channel_not_open, and no handler runs.
	expectError(t, p.call(protocol.TypeAuthStart, "cch_x", protocol.AuthStart{FlowID: "test_qr"}), imv2.CodeChannelNotOpen)
	expectError(t, p.call(protocol.TypeToolInvoke, "cch_x", protocol.ToolInvoke{ToolID: "test_send"}), imv2.CodeChannelNotOpen)
	expectError(t, p.call(protocol.TypeAuthLogout, "", nil), imv2.CodeChannelIDRequired)
	require.Empty(t, auth.calls)

	id, _ := p.open("")
	ans := p.call(protocol.TypeAuthStart, id, protocol.AuthStart{FlowID: "test_qr"})
	require.Equal(t, protocol.TypeAuthStartAck, ans.Type)
	var aa protocol.AuthAck
	require.NoError(t, ans.DecodePayload(&aa))
	require.Equal(t, protocol.AuthAck{ConnectorChannelID: id, FlowID: "test_qr", AuthSessionID: "auth_1", Status: protocol.AuthPending, QRCodeText: "qr://x", PollIntervalMillis: 2000}, aa)

	expectError(t, p.call(protocol.TypeAuthStart, id, protocol.AuthStart{FlowID: "not_a_flow"}), imv2.CodeInvalidPacket)

	ans = p.call(protocol.TypeAuthStatus, id, protocol.AuthStatusRequest{AuthSessionID: "auth_1"})
	require.Equal(t, protocol.TypeAuthStatusAck, ans.Type)
	aa = protocol.AuthAck{}
	require.NoError(t, ans.DecodePayload(&aa))
	require.Equal(t, protocol.AuthAuthenticated, aa.Status)
	require.NotNil(t, aa.ConnectionDescriptor, "authenticated acks carry the descriptor")

	ans = p.call(protocol.TypeAuthStatus, id, protocol.AuthStatusRequest{AuthSessionID: "auth_gone"})
	require.Equal(t, protocol.TypeAuthStatusAck, ans.Type)
	require.Equal(t, protocol.CodeAuthSessionNotFound, ans.Error.Code)

	ans = p.call(protocol.TypeAuthCancel, id, protocol.AuthCancel{AuthSessionID: "auth_1"})
	var ca protocol.AuthCancelAck
	require.NoError(t, ans.DecodePayload(&ca))
	require.Equal(t, protocol.AuthCancelAck{ConnectorChannelID: id, AuthSessionID: "auth_1", Status: "ignored"}, ca)

	ans = p.call(protocol.TypeAuthLogout, id, nil)
	require.Equal(t, protocol.TypeAuthLogoutAck, ans.Type)
	var lo protocol.StatusOK
	require.NoError(t, ans.DecodePayload(&lo))
	require.Equal(t, "ok", lo.Status)
	require.NotNil(t, lo.ConnectionDescriptor)

	ans = p.call(protocol.TypeToolInvoke, id, protocol.ToolInvoke{ToolID: "test_send", Arguments: json.RawMessage(`{"connector_channel_id":"cch_other"}`)})
	require.Equal(t, protocol.TypeToolInvokeAck, ans.Type)
	require.Nil(t, ans.Error)
	var ta protocol.ToolInvokeAck
	require.NoError(t, ans.DecodePayload(&ta))
	require.JSONEq(t, `{"channel":"`+id+`","tool":"test_send"}`, string(ta.Result), "routed by the envelope only")

	for _, tc := range []struct {
		name, args, tool string
		code             imv2.Code
	}{
		{"plain_error", `{"fail":"plain"}`, "test_send", protocol.CodeToolInvokeFailed},
		{"coded_error", `{"fail":"coded"}`, "test_send", protocol.CodeConnectionNotAuthenticated},
		{"tool_not_in_card", `{}`, "other_tool", protocol.CodeToolInvokeFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans := p.call(protocol.TypeToolInvoke, id, protocol.ToolInvoke{ToolID: tc.tool, Arguments: json.RawMessage(tc.args)})
			require.Equal(t, protocol.TypeToolInvokeAck, ans.Type, "failures travel in the ack (E3)")
			require.NotNil(t, ans.Error)
			require.Equal(t, tc.code, ans.Error.Code)
			require.NotContains(t, ans.Error.Message, "abc123", "platform detail is not echoed")
		})
	}
	auth.mu.Lock()
	defer auth.mu.Unlock()
	require.Equal(t, []string{"start " + id + " test_qr", "status " + id + " auth_1", "status " + id + " auth_gone", "cancel " + id + " auth_1", "logout " + id}, auth.calls)
}

// pipeSession serves one in-memory connection; the returned channel is
// closed when ServeConn returned (the session detached).
func pipeSession(t *testing.T, srv *Server) (*pipePeer, <-chan struct{}) {
	t.Helper()
	a, b := NewPipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeConn(context.Background(), b)
	}()
	t.Cleanup(func() { _ = a.Close(); <-done })
	return &pipePeer{t: t, c: a}, done
}

type pipePeer struct {
	t *testing.T
	c Conn
}

func (p *pipePeer) call(typ, channel string, payload any) *imv2.Packet {
	p.t.Helper()
	req, err := imv2.NewPacket(typ, channel, payload)
	require.NoError(p.t, err)
	req.RequestID = "req_" + req.PacketID
	ctx := ctxWait(p.t)
	require.NoError(p.t, p.c.Write(ctx, req))
	ans, err := p.c.Read(ctx)
	require.NoError(p.t, err)
	require.Equal(p.t, req.PacketID, ans.ReplyTo)
	return ans
}

func (p *pipePeer) hello(connID string) string {
	var ack protocol.ConnectorHelloAck
	ans := p.call(protocol.TypeConnectorHello, "", goodHello(connID))
	require.NoError(p.t, ans.DecodePayload(&ack))
	return ack.ConnectorID
}

func (p *pipePeer) open(id string) string {
	ans := p.call(protocol.TypeChannelOpen, id, nil)
	require.Equal(p.t, protocol.TypeChannelOpenAck, ans.Type, "%+v", ans.Error)
	return ans.ConnectorChannelID
}

func TestServer_ConnectorIDOfflineGrace(t *testing.T) {
	clk := fakeclock.New(t0)
	dropped := make(chan string, 4)
	srv, err := NewServer(ServerConfig{
		Card:          testCard(),
		NewTarget:     func(string) imv2.Target { return newRecTarget() },
		Clock:         clk,
		OnChannelDrop: func(id string) error { dropped <- id; return nil },
	})
	require.NoError(t, err)
	defer srv.Close()

	p, done := pipeSession(t, srv)
	connID := p.hello("")
	ch := p.open("")
	require.NoError(t, p.c.Close())
	<-done
	require.False(t, srv.IsOpen(ch))

	// Reconnect within the grace: same connector_id, same channel.
	clk.Advance(DefaultOfflineGrace - time.Minute)
	p, done = pipeSession(t, srv)
	require.Equal(t, connID, p.hello(connID))
	require.Equal(t, ch, p.open(ch), "within the grace the channel is found")
	require.NoError(t, p.c.Close())
	<-done

	// The grace restarts at the last disconnect; past it everything goes.
	clk.Advance(DefaultOfflineGrace - time.Minute)
	require.NotNil(t, srv.Channel(ch), "the grace counts from the last disconnect")
	clk.Advance(time.Minute)
	require.Equal(t, ch, recv(t, dropped))
	require.Nil(t, srv.Channel(ch))

	p, _ = pipeSession(t, srv)
	fresh := p.hello(connID)
	require.NotEqual(t, connID, fresh, "an expired connector_id is replaced")
	require.NotEqual(t, ch, p.open(ch), "its channels are gone")
}

func TestServer_HelloTimeout(t *testing.T) {
	clk := fakeclock.New(t0)
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }, Clock: clk})
	require.NoError(t, err)
	defer srv.Close()
	p, done := pipeSession(t, srv)
	p.call(protocol.TypePing, "", nil) // the session runs: its hello timer is armed
	clk.Advance(DefaultHelloTimeout)
	recv(t, done)

	p, done = pipeSession(t, srv)
	p.hello("")
	clk.Advance(DefaultHelloTimeout)
	p.call(protocol.TypePing, "", nil) // a hello-completed connection stays
	select {
	case <-done:
		t.Fatal("closed after hello")
	default:
	}
}

func TestServer_MaxChannelsEvictsClosed(t *testing.T) {
	dropped := make(chan string, 4)
	srv, err := NewServer(ServerConfig{
		Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() },
		MaxChannels: 2, OnChannelDrop: func(id string) error { dropped <- id; return nil },
	})
	require.NoError(t, err)
	defer srv.Close()
	p, _ := pipeSession(t, srv)
	p.hello("")
	a := p.open("")
	b := p.open("")
	ans := p.call(protocol.TypeChannelOpen, "", nil)
	expectError(t, ans, imv2.CodeChannelUnavailable)
	p.call(protocol.TypeChannelClose, a, nil)
	c := p.open("")
	require.Equal(t, a, recv(t, dropped), "the closed channel made room")
	require.ElementsMatch(t, []string{b, c}, srv.ChannelIDs())
}

func TestServer_CloseRefusesNewConnections(t *testing.T) {
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	a, b := NewPipe()
	defer a.Close()
	require.ErrorIs(t, srv.ServeConn(context.Background(), b), imv2.ErrClosed)
}

func TestServer_ConfigErrors(t *testing.T) {
	_, err := NewServer(ServerConfig{})
	require.Error(t, err)
	_, err = NewServer(ServerConfig{Card: testCard()})
	require.Error(t, err)
	c := testCard()
	c.Supports.Targets = nil
	_, err = NewServer(ServerConfig{Card: c, NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.Error(t, err, "no provider for the descriptor")
}
