package dataplane

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// faultyRegistry is the shared registry of two replicas whose database
// goes away on demand: while down is set, every call fails as a store
// that cannot be reached does (an error that is no *imv2.Error).
type faultyRegistry struct {
	*sharedRegistry
	down         atomic.Bool  // every call fails
	channelsDown atomic.Bool  // Known, Register and Forget fail
	calls        atomic.Int64 // calls refused
}

var errStoreDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (r *faultyRegistry) fault() error {
	if r.down.Load() {
		r.calls.Add(1)
		return errStoreDown
	}
	return nil
}

func (r *faultyRegistry) channelFault() error {
	if r.channelsDown.Load() {
		r.calls.Add(1)
		return errStoreDown
	}
	return r.fault()
}

func (r *faultyRegistry) Known(ctx context.Context, id string) (bool, error) {
	if err := r.channelFault(); err != nil {
		return false, err
	}
	return r.sharedRegistry.Known(ctx, id)
}

func (r *faultyRegistry) Register(ctx context.Context, id string) error {
	if err := r.channelFault(); err != nil {
		return err
	}
	return r.sharedRegistry.Register(ctx, id)
}

func (r *faultyRegistry) Forget(ctx context.Context, id string) error {
	if err := r.channelFault(); err != nil {
		return err
	}
	return r.sharedRegistry.Forget(ctx, id)
}

func (r *faultyRegistry) ConnectorSeen(ctx context.Context, id string) (time.Time, bool, error) {
	if err := r.fault(); err != nil {
		return time.Time{}, false, err
	}
	return r.sharedRegistry.ConnectorSeen(ctx, id)
}

func (r *faultyRegistry) SeenConnector(ctx context.Context, id string, t time.Time) error {
	if err := r.fault(); err != nil {
		return err
	}
	return r.sharedRegistry.SeenConnector(ctx, id, t)
}

// movingPair is two replicas on one faulty shared registry behind one URL
// whose router sends each new connection to the replica route names, as
// a load balancer does after a replica's connections were cut.
type movingPair struct {
	a, b  *Server
	reg   *faultyRegistry
	route atomic.Pointer[Server]
	url   string
}

func newMovingPair(t *testing.T) *movingPair {
	t.Helper()
	m := &movingPair{reg: &faultyRegistry{sharedRegistry: newSharedRegistry()}}
	mk := func() *Server {
		srv, err := NewServer(ServerConfig{
			Card:      testCard(),
			NewTarget: func(string) imv2.Target { return newRecTarget() },
			Registry:  m.reg,
		})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, srv.Close()) })
		return srv
	}
	m.a, m.b = mk(), mk()
	m.route.Store(m.a)
	hs := httptest.NewServer(withCard(testCard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.route.Load().ServeHTTP(w, r)
	})))
	t.Cleanup(hs.Close)
	m.url = "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	return m
}

// moveDuringOutage opens a channel on a, then takes the database away and
// moves xAgent to b: a's connections are cut and the client's backoff
// timer fires, so its reconnect lands on b while the store is down.
func moveDuringOutage(t *testing.T, m *movingPair, clk *armClock, c *Client, events chan connected, outage *atomic.Bool) (cid, ch string) {
	t.Helper()
	first := recv(t, events)
	opened, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	outage.Store(true)
	m.route.Store(m.b)
	m.a.dropConnections()
	recv(t, clk.armed)
	clk.Advance(time.Second) // the reconnect: to b, store down
	return first.connectorID, opened
}

// TestStoreOutage_W4_W11_HelloRefusedNotRenamed: xAgent moves to another
// replica while the database is away. That replica cannot ask the shared
// registry about the hello's connector_id; it refuses the hello for now
// (connector_channel_unavailable) instead of issuing a new connector_id,
// and xAgent retries with backoff. Once the database is back the retry
// keeps the connector_id and reopens the channel under its ID, and a user
// message sent there reaches xAgent. (The old code issued a new
// connector_id at once and answered the reopen invalid_packet, which
// xAgent never retried: the channel stayed dead after the database
// returned.)
func TestStoreOutage_W4_W11_HelloRefusedNotRenamed(t *testing.T) {
	m := newMovingPair(t)
	target := newRecTarget()
	c, clk, events := dialClient(t, m.url, func(cfg *ClientConfig) { cfg.Target = target })
	cid, ch := moveDuringOutage(t, m, clk, c, events, &m.reg.down)

	select {
	case d := <-clk.armed: // the hello was refused; the client sleeps before the next try
		require.Positive(t, d)
	case ev := <-events:
		t.Fatalf("the client settled on connector_id %s (was %s) with channels %v while the store was down", ev.connectorID, cid, ev.ids)
	case <-time.After(wait):
		t.Fatal("the client neither retried nor connected")
	}
	require.Positive(t, m.reg.calls.Load(), "b asked the store")
	require.Equal(t, cid, c.ConnectorID())

	m.reg.down.Store(false)
	clk.Advance(time.Second)
	ev := recv(t, events)
	require.Equal(t, cid, ev.connectorID, "the connector_id survives the outage")
	require.Equal(t, []string{ch}, ev.ids, "W11: the channel reopens under its ID")
	require.True(t, m.b.IsOpen(ch))
	_, err := m.b.Channel(ch).Send(ctxWait(t), imv2.ChatMessage{MessageID: "u-after", Text: "back"})
	require.NoError(t, err)
	require.Equal(t, "u-after", target.next(t).MessageID)
}

// TestStoreOutage_W5_W11_RefusedOpenRetried: the hello passes (the
// connector_id is known) but the channel registry fails during the
// reopen: b answers connector_channel_unavailable, never invalid_packet,
// and the client retries that reopen on the same connection with backoff
// on its clock until the store is back; the channel then carries user
// messages again. (The old code answered invalid_packet and the client
// never retried: 0 messages after the database returned.)
func TestStoreOutage_W5_W11_RefusedOpenRetried(t *testing.T) {
	m := newMovingPair(t)
	target := newRecTarget()
	c, clk, events := dialClient(t, m.url, func(cfg *ClientConfig) { cfg.Target = target })
	cid, ch := moveDuringOutage(t, m, clk, c, events, &m.reg.channelsDown)

	ev := recv(t, events) // b kept the connector_id; the reopen was refused
	require.Equal(t, cid, ev.connectorID)
	require.Empty(t, ev.ids)
	require.False(t, m.b.IsOpen(ch))
	d := recv(t, clk.armed) // the refused reopen waits for its retry
	require.GreaterOrEqual(t, d, 500*time.Millisecond, "W11: backoff with jitter in [min/2, min]")
	clk.Advance(time.Second) // still down: refused again, and the next wait armed
	recv(t, clk.armed)
	require.False(t, m.b.IsOpen(ch))
	calls := m.reg.calls.Load()
	require.GreaterOrEqual(t, calls, int64(2), "one refused reopen per try")

	m.reg.channelsDown.Store(false)
	clk.Advance(time.Second)
	require.Eventually(t, func() bool { return m.b.IsOpen(ch) }, wait, time.Millisecond, "the retry reopens the channel under its ID once the store is back")
	require.True(t, c.Connected())
	_, err := m.b.Channel(ch).Send(ctxWait(t), imv2.ChatMessage{MessageID: "u-after", Text: "back"})
	require.NoError(t, err)
	require.Equal(t, "u-after", target.next(t).MessageID)
}

// TestStoreOutage_W5_RefusalIsRetryableNotInvalid: a channel.open whose
// Registry call fails is answered connector_channel_unavailable (the
// packet was valid; the store is away), never invalid_packet, and the
// Registry issues no new ID in place of one it could not confirm.
func TestStoreOutage_W5_RefusalIsRetryableNotInvalid(t *testing.T) {
	m := newMovingPair(t)
	p, done := pipeSession(t, m.a)
	p.hello("")
	ch := p.open("")
	require.NoError(t, p.c.Close())
	<-done

	m.reg.channelsDown.Store(true)
	q, _ := pipeSession(t, m.b)
	q.hello("")
	for _, id := range []string{ch, ""} {
		ans := q.call(protocol.TypeChannelOpen, id, nil)
		require.Equal(t, imv2.TypeError, ans.Type, "open of %q answered %s", id, ans.Type)
		require.Equal(t, imv2.CodeChannelUnavailable, ans.Error.Code, "open of %q: %s", id, ans.Error.Message)
	}
	require.Len(t, m.b.ChannelIDs(), 0, "no channel made on a guess")

	m.reg.channelsDown.Store(false)
	require.Equal(t, ch, q.open(ch), "the same ID once the store is back")
}

var _ state.ConnectorRegistry = (*faultyRegistry)(nil)
