package dataplane

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// armClock is a fake clock that reports every timer armed on it. Given to
// a Client alone (its Channels and Conns keep the system clock), it shows
// exactly when the client sleeps before a reconnect.
type armClock struct {
	*fakeclock.Clock
	armed chan time.Duration
}

func newArmClock() *armClock {
	return &armClock{Clock: fakeclock.New(t0), armed: make(chan time.Duration, 16)}
}

func (c *armClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Clock.AfterFunc(d, f)
	c.armed <- d
	return t
}

type connected struct {
	connectorID string
	ids         []string
}

// dialClient dials url with a fake reconnect clock and returns the client,
// the clock and the OnConnected events.
func dialClient(t *testing.T, url string, mod func(*ClientConfig)) (*Client, *armClock, chan connected) {
	t.Helper()
	clk := newArmClock()
	events := make(chan connected, 16)
	cfg := ClientConfig{
		URL:     httpBase(url),
		Target:  newRecTarget(),
		Options: &imv2.Options{Clock: clock.System{}},
		OnConnected: func(id string, ids []string) {
			events <- connected{id, ids}
		},
		Advanced: ClientAdvanced{Clock: clk, Conn: ConnConfig{Clock: clock.System{}}, ReconnectMin: time.Second, ReconnectMax: time.Second},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := Dial(ctxWait(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, clk, events
}

// reconnect drops the server's connections and lets the client's backoff
// timer fire; it returns the OnConnected event of the reconnect.
func reconnect(t *testing.T, srv *Server, clk *armClock, events chan connected) connected {
	t.Helper()
	srv.dropConnections()
	d := recv(t, clk.armed) // the client noticed and sleeps before redialling
	require.GreaterOrEqual(t, d, 500*time.Millisecond, "W11: backoff with jitter in [min/2, min]")
	clk.Advance(time.Second)
	return recv(t, events)
}

func TestClient_W1_BearerKey(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) { c.APIKey = "k3y" })
	_, err := Dial(ctxWait(t), ClientConfig{URL: httpBase(url), Target: newRecTarget(), APIKey: "wrong"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "401")
	c, _, _ := dialClient(t, url, func(c *ClientConfig) { c.APIKey = "k3y" })
	require.True(t, c.Connected())
}

// The Connector refuses a hello naming another card: here the Card served
// at the URL is not the data plane's (W4).
func TestClient_W4_HelloRejected(t *testing.T) {
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.NoError(t, err)
	other := testCard()
	other.ConnectorCardID = "im.other"
	hs := httptest.NewServer(withCard(other, srv))
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	_, err = Dial(ctxWait(t), ClientConfig{URL: hs.URL, Target: newRecTarget()})
	require.ErrorIs(t, err, &imv2.Error{Code: protocol.CodeConnectorCardIDMismatch})
	require.Contains(t, err.Error(), "im.other")
}

func TestClient_W4_W8_HelloAndPing(t *testing.T) {
	_, url := startServer(t, nil)
	c, _, events := dialClient(t, url, nil)
	ev := recv(t, events)
	require.True(t, strings.HasPrefix(ev.connectorID, "conn_"))
	require.Equal(t, ev.connectorID, c.ConnectorID())
	require.Empty(t, ev.ids)
	require.NoError(t, c.Ping(ctxWait(t)))
}

func TestClient_W5_W11_ReconnectReopensStoredIDs(t *testing.T) {
	srv, url := startServer(t, nil)
	store := state.NewMemoryChannelStore(0)
	c, clk, events := dialClient(t, url, func(c *ClientConfig) { c.Store = store })
	first := recv(t, events)
	a, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	b, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	engineA := c.engine(a)

	ev := reconnect(t, srv, clk, events)
	require.Equal(t, first.connectorID, ev.connectorID, "the hello carried the last connector_id")
	require.Equal(t, []string{a, b}, ev.ids, "W11: every stored channel reopened with its stored ID")
	require.True(t, srv.IsOpen(a))
	require.True(t, srv.IsOpen(b))
	require.Same(t, engineA, c.engine(a), "the same Channel, with its state, is reattached")
	ids, _ := store.ChannelIDs(context.Background())
	require.Equal(t, []string{a, b}, ids)

	// W6 from the client: a closed channel leaves the store and is not reopened.
	require.NoError(t, c.CloseChannel(ctxWait(t), a))
	require.False(t, srv.IsOpen(a))
	ev = reconnect(t, srv, clk, events)
	require.Equal(t, []string{b}, ev.ids)
	require.False(t, srv.IsOpen(a))
}

func TestClient_W5_W11_UnknownStoredIDGetsNewOne(t *testing.T) {
	srv, url := startServer(t, nil)
	store := state.NewMemoryChannelStore(0)
	ctx := context.Background()
	require.NoError(t, store.SetConnectorID(ctx, "conn_from_a_previous_life"))
	require.NoError(t, store.AddChannel(ctx, "cch_from_a_previous_life"))
	c, _, events := dialClient(t, url, func(c *ClientConfig) { c.Store = store })
	ev := recv(t, events)
	require.NotEqual(t, "conn_from_a_previous_life", ev.connectorID)
	require.Len(t, ev.ids, 1)
	require.NotEqual(t, "cch_from_a_previous_life", ev.ids[0])
	ids, _ := store.ChannelIDs(ctx)
	require.Equal(t, ev.ids, ids, "the binding moved to the new ID")
	stored, _ := store.ConnectorID(ctx)
	require.Equal(t, c.ConnectorID(), stored)
	require.True(t, srv.IsOpen(ev.ids[0]))
	require.Nil(t, c.engine("cch_from_a_previous_life"))
}

func TestClient_W11_GivesUpAfterMaxAttempts(t *testing.T) {
	srv, url := startServer(t, nil)
	c, clk, _ := dialClient(t, url, func(c *ClientConfig) { c.Advanced.MaxReconnectAttempts = 2 })
	require.NoError(t, srv.Close()) // refuses every new connection with 503
	for i := 0; i < 2; i++ {
		recv(t, clk.armed)
		clk.Advance(time.Second)
	}
	recv(t, c.Done())
	require.ErrorContains(t, c.Err(), "gave up after 2")
	require.False(t, c.Connected())
	_, err := c.OpenChannel(ctxWait(t), "")
	require.ErrorContains(t, err, "gave up after 2", "OpenChannel says why nothing can open")
}

func TestClient_W7_DescriptorPushAndGet(t *testing.T) {
	status := make(chan string, 1)
	status <- protocol.StatusCreated
	srv, url := startServer(t, func(c *ServerConfig) {
		c.Describe = func(context.Context, string) ChannelInfo {
			s := <-status
			status <- s
			return ChannelInfo{Status: s}
		}
	})
	descs := make(chan *protocol.Descriptor, 4)
	c, _, _ := dialClient(t, url, func(c *ClientConfig) {
		c.OnDescriptor = func(_ string, d *protocol.Descriptor) { descs <- d }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusCreated, recv(t, descs).Connection.Status)
	<-status
	status <- protocol.StatusConnected
	require.NoError(t, srv.Push(ctxWait(t), ch))
	require.Equal(t, protocol.StatusConnected, recv(t, descs).Connection.Status)

	req, _ := imv2.NewPacket(protocol.TypeDescriptorGet, ch, nil)
	ans, err := c.Request(ctxWait(t), req)
	require.NoError(t, err)
	require.Equal(t, protocol.TypeDescriptorGetAck, ans.Type)
	require.Equal(t, req.RequestID, ans.RequestID)
}

func TestClient_W12_RequestToolAndErrors(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) { c.Tools = ToolFunc(echoTool) })
	c, _, _ := dialClient(t, url, nil)
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	req, _ := imv2.NewPacket(protocol.TypeToolInvoke, ch, protocol.ToolInvoke{ToolID: "test_send"})
	ans, err := c.Request(ctxWait(t), req)
	require.NoError(t, err)
	var ta protocol.ToolInvokeAck
	require.NoError(t, ans.DecodePayload(&ta))
	require.JSONEq(t, `{"channel":"`+ch+`","tool":"test_send"}`, string(ta.Result))

	req, _ = imv2.NewPacket(protocol.TypeToolInvoke, "cch_nope", protocol.ToolInvoke{ToolID: "test_send"})
	ans, err = c.Request(ctxWait(t), req)
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeChannelNotOpen})
	require.Equal(t, imv2.TypeError, ans.Type)

	req, _ = imv2.NewPacket(protocol.TypeToolInvoke, ch, protocol.ToolInvoke{ToolID: "unknown", Arguments: json.RawMessage(`{}`)})
	_, err = c.Request(ctxWait(t), req)
	require.ErrorIs(t, err, &imv2.Error{Code: protocol.CodeToolInvokeFailed})
}

func TestClient_ConfigErrors(t *testing.T) {
	for _, cfg := range []ClientConfig{
		{},
		{URL: "http://x"},
		{URL: "ftp://x", Target: newRecTarget()},
		{URL: "ws://x", Target: newRecTarget()},
		{URL: "http://x/ws", Target: newRecTarget()}, // the old /ws form is refused, not guessed
		{URL: "http:///nohost", Target: newRecTarget()},
	} {
		_, err := Dial(ctxWait(t), cfg)
		require.Error(t, err, "%+v", cfg)
	}
	for base, ws := range map[string]string{
		"https://h/p":       "wss://h/p/ws",
		"http://h":          "ws://h/ws",
		"http://h:8/a/b/?q": "ws://h:8/a/b/ws",
	} {
		u, err := baseURL(base)
		require.NoError(t, err)
		require.Equal(t, ws, dataPlaneURL(u))
	}
}

// scriptedConnector serves the Card and one connection with a hand-written
// Connector: it answers the hello and one channel.open, then runs script.
// It returns the base URL.
func scriptedConnector(t *testing.T, script func(c *wsConn, channelID string)) string {
	t.Helper()
	var served atomic.Bool
	done := make(chan struct{})
	hs := httptest.NewServer(withCard(testCard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Swap(true) {
			http.Error(w, "one connection only", http.StatusServiceUnavailable)
			return
		}
		defer close(done)
		up := websocket.Upgrader{Subprotocols: []string{protocol.Subprotocol}}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := newWSConn(ws, ConnConfig{})
		defer c.Close()
		ctx := context.Background()
		hello, err := c.Read(ctx)
		if err != nil {
			return
		}
		ack, _ := imv2.NewResponse(hello, protocol.TypeConnectorHelloAck, protocol.ConnectorHelloAck{ConnectorCardID: testCardID, ConnectorID: "conn_s", ProtocolVersion: "3.0"})
		_ = c.Write(ctx, ack)
		open, err := c.Read(ctx)
		if err != nil {
			return
		}
		id := "cch_s"
		oack, _ := imv2.NewResponse(open, protocol.TypeChannelOpenAck, protocol.ChannelOpenAck{ConnectorChannelID: id, ConnectionDescriptor: &protocol.Descriptor{
			Schema: protocol.DescriptorSchema,
			Connection: protocol.Connection{ConnectorCardID: testCardID, ConnectorID: "conn_s", ConnectorChannelID: id,
				TargetType: imv2.TargetTypeIM, Profiles: []string{imv2.ProfileIMv2}, Status: protocol.StatusCreated},
			Target: protocol.DescriptorTarget{Provider: "testim", DisplayName: "x"},
		}})
		oack.ConnectorChannelID = id
		_ = c.Write(ctx, oack)
		script(c, id)
	})))
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return hs.URL
}

func TestClient_I1_X2_E2_ClientSideRouting(t *testing.T) {
	answers := make(chan *imv2.Packet, 16)
	url := scriptedConnector(t, func(c *wsConn, id string) {
		ctx := context.Background()
		ask := func(p *imv2.Packet) {
			if err := c.Write(ctx, p); err != nil {
				return
			}
			if a, err := c.Read(ctx); err == nil || isInvalidFrame(err) {
				answers <- a
			}
		}
		noRoute := userMessage(id, "m1", "x")
		noRoute.ConnectorChannelID = ""
		ask(noRoute)
		ask(userMessage("cch_nope", "m2", "x"))
		bogus, _ := imv2.NewPacket("no.such.type", "", nil) // connection-level: answered; channel-scoped ones are dropped (P6)
		ask(bogus)
		_ = c.writeData(ctx, []byte("garbage"))
		if a, err := c.Read(ctx); err == nil {
			answers <- a
		}
		ask(userMessage(id, "m3", "routed"))
		_, _ = c.Read(ctx) // hold until the client goes
	})
	agent := newRecTarget()
	c, err := Dial(ctxWait(t), ClientConfig{URL: url, Target: agent, Advanced: ClientAdvanced{MaxReconnectAttempts: 1, ReconnectMin: time.Millisecond, ReconnectMax: time.Millisecond}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	expectError(t, recv(t, answers), imv2.CodeChannelIDRequired)
	expectError(t, recv(t, answers), imv2.CodeChannelNotOpen)
	expectError(t, recv(t, answers), imv2.CodeUnsupportedPacket)
	expectError(t, recv(t, answers), imv2.CodeInvalidPacket)
	ack := recv(t, answers)
	require.Equal(t, imv2.TypeChatMessageAck, ack.Type, "the client keeps working (E2)")
	require.Equal(t, "routed", agent.next(t).Text)
	require.Equal(t, 0, agent.count("m1")+agent.count("m2"))
}
