package dataplane

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// swallowOpen loses the next channel.open it is asked to write while on is
// set, as a connection that silently dropped the frame would.
type swallowOpen struct {
	Conn
	on *atomic.Bool
}

func (s *swallowOpen) Write(ctx context.Context, p *imv2.Packet) error {
	if p.Type == protocol.TypeChannelOpen && s.on.CompareAndSwap(true, false) {
		return nil
	}
	return s.Conn.Write(ctx, p)
}

// TestClient_W11_UnansweredReopenReconnects: a reopen after a reconnect
// that gets no answer must not leave the channel detached on a live
// connection, where nothing would retry it (the soak found this: pending
// messages of both sides stranded until the next network failure). The
// client starts over with backoff and reopens it.
func TestClient_W11_UnansweredReopenReconnects(t *testing.T) {
	srv, url := startServer(t, nil)
	var swallow atomic.Bool
	c, clk, events := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Advanced.RequestTimeout = 200 * time.Millisecond
		cfg.Advanced.WrapConn = func(conn Conn) Conn { return &swallowOpen{Conn: conn, on: &swallow} }
	})
	recv(t, events)
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)

	swallow.Store(true)
	srv.dropConnections()
	recv(t, clk.armed)
	clk.Advance(time.Second) // reconnects; the reopen is lost and times out
	select {
	case d := <-clk.armed:
		require.Positive(t, d)
	case ev := <-events:
		t.Fatalf("the client settled with channels %v after a reopen got no answer; %s stays detached", ev.ids, ch)
	case <-time.After(wait):
		t.Fatal("the client neither reconnected nor reported a connection")
	}
	clk.Advance(time.Second)
	ev := recv(t, events)
	require.Equal(t, []string{ch}, ev.ids)
	require.True(t, srv.IsOpen(ch))
	require.NotNil(t, c.engine(ch), "the Channel is held under its ID")
}
