package dataplane

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// gatedConn records the size of every write(2) that reaches the socket
// and, once armed, holds the first data write until the gate opens.
type gatedConn struct {
	net.Conn
	mu      sync.Mutex
	armed   bool
	gate    chan struct{} // closed: writes proceed
	entered chan struct{} // closed when the first armed write is held
	writes  []int
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	armed := g.armed
	if armed {
		g.writes = append(g.writes, len(p))
		if len(g.writes) == 1 {
			close(g.entered)
		}
	}
	g.mu.Unlock()
	if armed {
		<-g.gate
	}
	return g.Conn.Write(p)
}

func (g *gatedConn) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.writes...)
}

// coalescePair is a wsConn dialled over a gatedConn (under a batchConn
// when batched) to a raw gorilla peer that forwards every text frame.
func coalescePair(t *testing.T, batched bool) (*wsConn, *gatedConn, <-chan string, <-chan error) {
	t.Helper()
	frames := make(chan string, 1024)
	peerErr := make(chan error, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{Subprotocols: []string{protocol.Subprotocol}}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				peerErr <- err
				return
			}
			frames <- string(data)
		}
	}))
	t.Cleanup(hs.Close)
	g := &gatedConn{gate: make(chan struct{}), entered: make(chan struct{})}
	var slot batchSlot
	d := slot.dialer(websocket.Dialer{
		Subprotocols: []string{protocol.Subprotocol},
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			nc, err := nd.DialContext(ctx, network, addr)
			g.Conn = nc
			return g, err
		},
	})
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	bc := slot.bc
	require.NotNil(t, bc, "the dialer records its batchConn")
	if !batched {
		bc = nil
	}
	c := newBatchedWSConn(ws, bc, ConnConfig{PingInterval: -1})
	t.Cleanup(func() { _ = c.Close() })
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	return c, g, frames, peerErr
}

// writeAsync writes p on another goroutine: on a quiet connection the
// caller of Write writes the frame itself, and the gate holds it.
func writeAsync(ctx context.Context, c *wsConn, p *imv2.Packet) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- c.Write(ctx, p) }()
	return errc
}

func textPacket(t *testing.T, i int, size int) *imv2.Packet {
	t.Helper()
	p, err := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{Text: strconv.Itoa(i) + " " + strings.Repeat("x", size)})
	require.NoError(t, err)
	return p
}

// The frames queued while a write(2) is in progress (by the caller of
// Write, or by the writer goroutine) leave together in the next one, in
// order; without the batchConn each costs its own write(2).
func TestConn_WritesQueuedDuringAWriteLeaveTogether(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batched bool
		writes  int // write(2) calls for 1 + 10 frames
	}{
		{"batched", true, 2},
		{"unbatched", false, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, g, frames, _ := coalescePair(t, tc.batched)
			ctx := context.Background()
			first := writeAsync(ctx, c, textPacket(t, 0, 10))
			recv(t, g.entered) // the first frame's write(2) is in progress
			for i := 1; i <= 10; i++ {
				require.NoError(t, c.Write(ctx, textPacket(t, i, 10)))
			}
			close(g.gate)
			require.NoError(t, recv(t, first))
			for i := 0; i <= 10; i++ {
				p, err := imv2.DecodePacket([]byte(recv(t, frames)))
				require.NoError(t, err)
				m, err := imv2.DecodeChatMessage(p, imv2.ToConnector)
				require.NoError(t, err)
				require.True(t, strings.HasPrefix(m.Text, strconv.Itoa(i)+" "), "frame %d out of order: %q", i, m.Text)
			}
			require.Len(t, g.sizes(), tc.writes)
		})
	}
}

// A batch leaves in writes of at most maxBatchBytes.
func TestConn_CoalescedWritesAreBounded(t *testing.T) {
	c, g, frames, _ := coalescePair(t, true)
	ctx := context.Background()
	first := writeAsync(ctx, c, textPacket(t, 0, 10))
	recv(t, g.entered)
	const n, size = 100, 2000 // 200 KB queued
	for i := 1; i <= n; i++ {
		require.NoError(t, c.Write(ctx, textPacket(t, i, size)))
	}
	close(g.gate)
	require.NoError(t, recv(t, first))
	for range n + 1 {
		recv(t, frames)
	}
	sizes := g.sizes()
	total := 0
	for _, s := range sizes[1:] {
		require.LessOrEqual(t, s, maxBatchBytes)
		total += s
	}
	require.Greater(t, total, n*size)
	require.GreaterOrEqual(t, len(sizes)-1, total/maxBatchBytes, "the queue left in writes of at most %d bytes: %v", maxBatchBytes, sizes)
	require.Less(t, len(sizes), n/4, "the queue was coalesced: %v", sizes)
}

// Close writes every frame already accepted before its close frame: a
// nil from Write is never a lost frame on a graceful close.
func TestConn_CloseFlushesQueuedFrames(t *testing.T) {
	c, g, frames, peerErr := coalescePair(t, true)
	ctx := context.Background()
	first := writeAsync(ctx, c, textPacket(t, 0, 10))
	recv(t, g.entered)
	for i := 1; i <= 5; i++ {
		require.NoError(t, c.Write(ctx, textPacket(t, i, 10)))
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = c.Close()
	}()
	close(g.gate)
	require.NoError(t, recv(t, first))
	for range 6 {
		recv(t, frames)
	}
	code, ok := CloseCode(recv(t, peerErr))
	require.True(t, ok)
	require.Equal(t, websocket.CloseNormalClosure, code)
	recv(t, closed)
	require.ErrorIs(t, c.Write(ctx, textPacket(t, 9, 10)), imv2.ErrClosed)
}
