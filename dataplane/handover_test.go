package dataplane

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
)

// serveOn serves srv on addr until the test ends or stop is called.
func serveOn(t *testing.T, addr string, srv *Server) (stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	hs := &http.Server{Handler: withCard(testCard(), srv)}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = hs.Close()
		require.NoError(t, srv.Close())
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// TestClient_S2_W5_PendingFinalMovesToTheNewChannelID: a final sent while the
// Connector is down stays pending; the Connector comes back without its
// channel registry and answers the reopen with a new ID; the final is
// delivered on the new channel with its message_id, not stranded, and its
// Delivery reports the outcome from there.
func TestClient_S2_W5_PendingFinalMovesToTheNewChannelID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	newSrv := func(target imv2.Target) *Server {
		srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return target }})
		require.NoError(t, err)
		return srv
	}
	stop := serveOn(t, addr, newSrv(newRecTarget()))
	c, clk, events := dialClient(t, "ws://"+addr+"/ws", nil) // dialClient dials the base URL
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	oldID := ch
	stop() // the Connector goes away

	rep, err := c.NewReply(oldID, "a1")
	require.NoError(t, err)
	d, err := rep.Final(ctxWait(t), imv2.ChatMessage{Text: "while you were away"})
	require.NoError(t, err)
	second := newRecTarget()
	serveOn(t, addr, newSrv(second)) // back, with a fresh (memory) registry
	for {
		clk.Advance(time.Second) // the client's reconnect backoff
		select {
		case ev := <-events:
			if len(ev.ids) == 0 {
				continue // the first connect, before the channel existed
			}
			require.Len(t, ev.ids, 1)
			require.NotEqual(t, oldID, ev.ids[0], "W5: the Connector issued a new ID")
			m := second.next(t)
			require.Equal(t, "a1", m.MessageID, "S2: same message_id")
			require.Equal(t, "while you were away", m.Text)
			// The handle follows the final to the new channel.
			st, err := d.Wait(ctxWait(t))
			require.NoError(t, err)
			require.Equal(t, imv2.AckAccepted, st)
			require.Equal(t, ev.ids[0], d.ChannelID())
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
