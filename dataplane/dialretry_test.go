package dataplane

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// TestClient_W11_DialWaitsForTheConnector: Dial against a Connector not
// yet listening retries with the backoff until it is up, instead of
// returning the first refused connection; with ctx ending first it
// returns ctx's error with the last failure.
func TestClient_W11_DialWaitsForTheConnector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	clk := newArmClock()
	cfg := ClientConfig{
		URL: "http://" + addr, Target: newRecTarget(),
		Options:  &imv2.Options{Clock: clock.System{}},
		Advanced: ClientAdvanced{Clock: clk, Conn: ConnConfig{Clock: clock.System{}}, ReconnectMin: time.Second, ReconnectMax: 4 * time.Second},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		c   *Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Dial(ctx, cfg)
		done <- result{c, err}
	}()
	for i := range 3 { // refused three times; the delay doubles up to the cap
		d := recv(t, clk.armed)
		hi := min(time.Second<<i, 4*time.Second)
		require.True(t, d >= hi/2 && d <= hi, "attempt %d: backoff %v outside [%v, %v]", i+1, d, hi/2, hi)
		clk.Advance(hi)
	}
	recv(t, clk.armed)
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.NoError(t, err)
	serveOn(t, addr, srv)
	clk.Advance(4 * time.Second)
	r := recv(t, done)
	require.NoError(t, r.err)
	require.NoError(t, r.c.Close())

	// Nobody listening and ctx ends: ctx's error, the last failure kept.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.URL = "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		c, err := Dial(ctx2, cfg)
		done <- result{c, err}
	}()
	recv(t, clk.armed)
	cancel2()
	r = recv(t, done)
	require.ErrorIs(t, r.err, context.Canceled)
	require.ErrorContains(t, r.err, "connection refused")
}

// TestClient_W1_DialRefusalIsNotRetried: a refusal (a wrong key) is
// returned at once, with no backoff armed.
func TestClient_W1_DialRefusalIsNotRetried(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) { c.APIKey = "k3y" })
	clk := newArmClock()
	_, err := Dial(ctxWait(t), ClientConfig{URL: httpBase(url), Target: newRecTarget(), APIKey: "wrong", Advanced: ClientAdvanced{Clock: clk}})
	require.ErrorContains(t, err, "401")
	select {
	case d := <-clk.armed:
		t.Fatalf("a refusal was retried after %v", d)
	default:
	}
}

// TestClient_W5_OpenChannelWaitsForTheReconnect: OpenChannel while the
// connection is down waits for the reconnect and opens then, instead of
// "not connected".
func TestClient_W5_OpenChannelWaitsForTheReconnect(t *testing.T) {
	srv, url := startServer(t, nil)
	c, clk, events := dialClient(t, url, nil)
	recv(t, events)
	srv.dropConnections()
	recv(t, clk.armed)
	type result struct {
		ch  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		ch, err := c.OpenChannel(ctxWait(t), "")
		done <- result{ch, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("OpenChannel returned while disconnected: %v", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Advance(time.Second)
	r := recv(t, done)
	require.NoError(t, r.err)
	require.True(t, srv.IsOpen(r.ch))

	// ctx ending while disconnected ends the wait.
	srv.dropConnections()
	recv(t, clk.armed)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.OpenChannel(ctx, "")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestClient_W4_DialWaitsForAHeldConnectorID: a restarted xAgent whose
// connector_id is still held by its old connection (killed, not yet
// noticed) is refused connector_id_mismatch; Dial retries and gets in
// once the old connection ends, where it returned the refusal before.
func TestClient_W4_DialWaitsForAHeldConnectorID(t *testing.T) {
	_, url := startServer(t, nil)
	old, _, _ := dialClient(t, url, nil)
	store := state.NewMemoryChannelStore(0)
	require.NoError(t, store.SetConnectorID(ctxWait(t), old.ConnectorID()))

	clk := newArmClock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := Dial(ctx, ClientConfig{URL: httpBase(url), Target: newRecTarget(), Store: store,
			Advanced: ClientAdvanced{Clock: clk, Conn: ConnConfig{Clock: clock.System{}}},
			Options:  &imv2.Options{Clock: clock.System{}}})
		if err == nil {
			err = c.Close()
		}
		done <- err
	}()
	recv(t, clk.armed) // refused while the old connection holds the ID; backing off
	require.NoError(t, old.Close())
	clk.Advance(time.Minute)
	require.NoError(t, recv(t, done))
}
