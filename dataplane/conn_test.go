package dataplane

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

func TestConn_W1_SubprotocolRequired(t *testing.T) {
	_, url := startServer(t, nil)
	for _, tc := range []struct {
		name   string
		protos []string
		want   int
	}{
		{"none", nil, http.StatusBadRequest},
		{"other", []string{"chat"}, http.StatusBadRequest},
		{"ours", []string{protocol.Subprotocol}, http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := websocket.Dialer{Subprotocols: tc.protos}
			ws, resp, err := d.Dial(url, nil)
			require.NotNil(t, resp)
			_ = resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
			if tc.want != http.StatusSwitchingProtocols {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, protocol.Subprotocol, ws.Subprotocol(), "W1: the server selects the subprotocol")
			_ = ws.Close()
		})
	}
}

func TestConn_W1_BearerKey(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) { c.APIKey = "s3cret" })
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong", "Bearer nope", http.StatusUnauthorized},
		{"prefix_of_key", "Bearer s3cre", http.StatusUnauthorized},
		{"not_bearer", "Basic s3cret", http.StatusUnauthorized},
		{"right", "Bearer s3cret", http.StatusSwitchingProtocols},
		{"two_spaces", "Bearer  s3cret", http.StatusSwitchingProtocols}, // RFC 9110 §11.4: 1*SP, as the HTTP kit reads it
		{"tab", "Bearer\ts3cret", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
			ws, resp, err := d.Dial(url, h)
			require.NotNil(t, resp)
			_ = resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
			if err == nil {
				_ = ws.Close()
			}
		})
	}
}

func TestConn_W2_FrameOverReadLimitCloses1009(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) { c.Conn.ReadLimit = 4096 })
	p := dialPeer(t, url, nil)
	p.hello("")
	// Large enough to overflow the socket buffers: the server must drain it
	// after its close frame, or the peer would read a reset instead.
	big := strings.Repeat("x", 16<<20)
	p.conn.cfg.ReadLimit = 32 << 20 // this peer may send it
	// The write itself may fail: the server's close frame can win the race.
	_ = p.rawTextErr(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_big","type":"ping","payload":{"pad":"` + big + `"}}`)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := p.conn.Read(ctx)
	require.Error(t, err)
	code, ok := CloseCode(err)
	require.True(t, ok, "W2: a clean close frame, not a reset: %v", err)
	require.Equal(t, websocket.CloseMessageTooBig, code)
}

func TestConn_W2_WriteOverLimitRefused(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	p.conn.cfg.ReadLimit = 256 // this side refuses to send what it would not read
	pkt, err := imv2.NewPacket(protocol.TypePing, "", map[string]string{"pad": strings.Repeat("x", 512)})
	require.NoError(t, err)
	err = p.conn.Write(context.Background(), pkt)
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeInvalidPacket})
	require.False(t, imv2.SafeToRetry(err))
	p.call(protocol.TypePing, "", nil) // still usable
}

func TestConn_W2_BinaryFrameGetsInvalidPacket(t *testing.T) {
	_, url := startServer(t, nil)
	ws := dialRaw(t, url)
	require.NoError(t, ws.WriteMessage(websocket.BinaryMessage, []byte(`{"schema":"xagent.connector.packet/v1","packet_id":"p1","type":"ping"}`)))
	ans := readRaw(t, ws)
	expectError(t, ans, imv2.CodeInvalidPacket)
	require.Contains(t, ans.Error.Message, "text frames only")
	// E2: the connection keeps working.
	ping, _ := imv2.NewPacket(protocol.TypePing, "", nil)
	ping.RequestID = "req_after_binary"
	b, _ := ping.Encode()
	require.NoError(t, ws.WriteMessage(websocket.TextMessage, b))
	pong := readRaw(t, ws)
	require.Equal(t, protocol.TypePong, pong.Type)
	require.Equal(t, "req_after_binary", pong.RequestID)
}

func TestConn_E2_InvalidFramesKeepConnection(t *testing.T) {
	_, url := startServer(t, nil)
	p := dialPeer(t, url, nil)
	for _, frame := range []string{
		`not json`,
		`{}`,
		`[1,2]`,
		`{"schema":"other","packet_id":"p","type":"ping"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"","type":"ping"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","payload":[]}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","type":"pong"}`,
	} {
		p.rawText(frame)
		expectError(t, p.next(), imv2.CodeInvalidPacket)
	}
	// An invalid frame that names a packet is answered with reply_to.
	p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_x","request_id":"req_x","type":"ping","time":-1}`)
	ans := p.next()
	expectError(t, ans, imv2.CodeInvalidPacket)
	require.Equal(t, "pkt_x", ans.ReplyTo)
	require.Equal(t, "req_x", ans.RequestID)
	// An invalid error packet is never answered: the next answer is the hello's.
	p.rawText(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_e","type":"error","error":{"code":""}}`)
	p.hello("")
}

// keepaliveServer upgrades one connection, wraps it in a wsConn with clk
// and hands it to the test; the client side is a bare gorilla conn.
func keepalivePair(t *testing.T, clk clock.Clock, answerPings bool, onPong func()) (*wsConn, *websocket.Conn) {
	t.Helper()
	return connPair(t, ConnConfig{Clock: clk, PingInterval: 30 * time.Second, PongTimeout: 10 * time.Second, onPong: onPong}, answerPings)
}

// connPair is keepalivePair with the wsConn's whole config.
func connPair(t *testing.T, cfg ConnConfig, answerPings bool) (*wsConn, *websocket.Conn) {
	t.Helper()
	got := make(chan *wsConn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{Subprotocols: []string{protocol.Subprotocol}}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		got <- newWSConn(ws, cfg)
	}))
	t.Cleanup(hs.Close)
	peer := dialRaw(t, "ws"+strings.TrimPrefix(hs.URL, "http"))
	if !answerPings {
		peer.SetPingHandler(func(string) error { return nil })
	}
	c := recv(t, got)
	t.Cleanup(func() { _ = c.Close() })
	return c, peer
}

// readLoop keeps reading the bare peer so its control handlers run.
func readLoop(ws *websocket.Conn) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				done <- err
				return
			}
		}
	}()
	return done
}

func TestConn_Keepalive_NoPongDrops(t *testing.T) {
	clk := fakeclock.New(t0)
	c, peer := keepalivePair(t, clk, false, nil)
	ended := readLoop(peer)
	clk.Advance(30 * time.Second) // ping goes out, unanswered
	clk.Advance(10 * time.Second) // pong deadline
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := c.Read(ctx)
	require.ErrorIs(t, err, errPongTimeout)
	require.Error(t, recv(t, ended), "the peer sees the connection end")
}

func TestConn_Keepalive_PongKeepsAlive(t *testing.T) {
	clk := fakeclock.New(t0)
	ponged := make(chan struct{}, 4)
	c, peer := keepalivePair(t, clk, true, func() { ponged <- struct{}{} })
	ended := readLoop(peer)
	clk.Advance(30 * time.Second)
	recv(t, ponged) // the peer answered before the deadline passes
	clk.Advance(10 * time.Second)
	// Still up: a write reaches the peer.
	p, _ := imv2.NewPacket(protocol.TypePing, "", nil)
	require.NoError(t, c.Write(context.Background(), p))
	require.NoError(t, c.Close())
	code, ok := CloseCode(recv(t, ended))
	require.True(t, ok)
	require.Equal(t, websocket.CloseNormalClosure, code, "graceful close sends 1000")
}

func TestConn_Pipe(t *testing.T) {
	a, b := NewPipe()
	p, _ := imv2.NewPacket(protocol.TypePing, "", nil)
	ctx := ctxWait(t)
	require.NoError(t, a.Write(ctx, p))
	q, err := b.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, p.PacketID, q.PacketID)
	require.NoError(t, b.Close())
	_, err = a.Read(ctx)
	require.ErrorIs(t, err, imv2.ErrClosed)
	require.ErrorIs(t, a.Write(ctx, p), imv2.ErrClosed)
}

func TestConn_LoggingConnLogsEnvelopeNotPayload(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, b := NewPipe()
	la := NewLoggingConn(a, log)
	defer la.Close()
	p, _ := imv2.NewPacket(protocol.TypeAuthStart, "cch_1", protocol.AuthStart{FlowID: "f", Input: map[string]string{"bot_token": "TOPSECRET"}})
	ctx := ctxWait(t)
	require.NoError(t, la.Write(ctx, p))
	_, err := b.Read(ctx)
	require.NoError(t, err)
	require.Contains(t, buf.String(), "type=auth.start")
	require.Contains(t, buf.String(), "connector_channel_id=cch_1")
	require.NotContains(t, buf.String(), "TOPSECRET")
}
