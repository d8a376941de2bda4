package dataplane

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/state"
)

// sharedRegistry is a ConnectorRegistry two Servers of a test share, as
// replicas share pgstore.
type sharedRegistry struct {
	*state.MemoryRegistry
	mu   sync.Mutex
	seen map[string]time.Time
	fail bool // ConnectorSeen fails
}

func newSharedRegistry() *sharedRegistry {
	return &sharedRegistry{MemoryRegistry: state.NewMemoryRegistry(0), seen: map[string]time.Time{}}
}

func (r *sharedRegistry) SeenConnector(_ context.Context, id string, t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.After(r.seen[id]) {
		r.seen[id] = t
	}
	return nil
}

func (r *sharedRegistry) ConnectorSeen(_ context.Context, id string) (time.Time, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return time.Time{}, false, errors.New("store down")
	}
	t, ok := r.seen[id]
	return t, ok, nil
}

func (r *sharedRegistry) ForgetConnector(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, id)
	return nil
}

// replicaPair returns two Servers on one clock and one shared registry,
// with the channels each dropped for good.
func replicaPair(t *testing.T) (a, b *Server, reg *sharedRegistry, clk *fakeclock.Clock, dropped chan string) {
	t.Helper()
	clk = fakeclock.New(t0)
	reg = newSharedRegistry()
	dropped = make(chan string, 8)
	mk := func() *Server {
		srv, err := NewServer(ServerConfig{
			Card:          testCard(),
			NewTarget:     func(string) imv2.Target { return newRecTarget() },
			Clock:         clk,
			Registry:      reg,
			OnChannelDrop: func(id string) error { dropped <- id; return nil },
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		return srv
	}
	return mk(), mk(), reg, clk, dropped
}

// TestConnectorRegistry_W5_HelloToOtherReplicaKeepsConnectorID: a
// connector_id replica a issued is kept by replica b, and its channel
// resumes there; an unknown one still gets a new ID.
func TestConnectorRegistry_W5_HelloToOtherReplicaKeepsConnectorID(t *testing.T) {
	a, b, _, _, _ := replicaPair(t)
	p, done := pipeSession(t, a)
	cid := p.hello("")
	ch := p.open("")
	require.NoError(t, p.c.Close())
	<-done

	q, _ := pipeSession(t, b)
	require.Equal(t, cid, q.hello(cid), "b keeps the connector_id a issued")
	require.Equal(t, ch, q.open(ch), "and resumes its channel")
	r, _ := pipeSession(t, b)
	require.NotEqual(t, "conn_unknown", r.hello("conn_unknown"), "an ID no replica issued is replaced")
}

// TestConnectorRegistry_W5_GraceExpiryForgetsNothingWhileConnectedElsewhere:
// a's grace for a connector_id that connected to b since runs out: a
// releases its copy, and neither the channel nor the connector_id is
// forgotten, nor OnChannelDrop called. Past b's own grace, b drops all.
func TestConnectorRegistry_W5_GraceExpiryForgetsNothingWhileConnectedElsewhere(t *testing.T) {
	ctx := context.Background()
	a, b, reg, clk, dropped := replicaPair(t)
	p, done := pipeSession(t, a)
	cid := p.hello("")
	ch := p.open("")
	require.NoError(t, p.c.Close())
	<-done
	clk.Advance(time.Minute)
	q, qdone := pipeSession(t, b)
	q.hello(cid)
	q.open(ch)

	clk.Advance(DefaultOfflineGrace)
	require.Eventually(t, func() bool { return a.Channel(ch) == nil }, wait, time.Millisecond)
	known, _ := reg.Known(ctx, ch)
	require.True(t, known, "the channel open on b stays registered")
	_, ok, _ := reg.ConnectorSeen(ctx, cid)
	require.True(t, ok, "the connector_id connected to b stays")
	require.NotNil(t, b.Channel(ch))
	select {
	case id := <-dropped:
		t.Fatalf("OnChannelDrop(%s) on a, though the channel lives on b", id)
	default:
	}

	require.NoError(t, q.c.Close())
	<-qdone
	clk.Advance(DefaultOfflineGrace)
	require.Equal(t, ch, recv(t, dropped), "past the grace everywhere, the channel is dropped")
	require.Eventually(t, func() bool { _, ok, _ := reg.ConnectorSeen(ctx, cid); return !ok }, wait, time.Millisecond)
	// The registry forgets the channel after OnChannelDrop returned.
	require.Eventually(t, func() bool { known, _ := reg.Known(ctx, ch); return !known }, wait, time.Millisecond)
}

// TestConnectorRegistry_GraceExpiryOnStoreErrorKeepsSharedState: when
// the shared registry cannot be read at the grace expiry, the replica
// releases only its own copy.
func TestConnectorRegistry_GraceExpiryOnStoreErrorKeepsSharedState(t *testing.T) {
	ctx := context.Background()
	a, _, reg, clk, dropped := replicaPair(t)
	p, done := pipeSession(t, a)
	p.hello("")
	ch := p.open("")
	require.NoError(t, p.c.Close())
	<-done
	reg.mu.Lock()
	reg.fail = true
	reg.mu.Unlock()
	clk.Advance(DefaultOfflineGrace)
	require.Eventually(t, func() bool { return a.Channel(ch) == nil }, wait, time.Millisecond)
	known, _ := reg.Known(ctx, ch)
	require.True(t, known, "a store error never forgets shared state")
	select {
	case id := <-dropped:
		t.Fatalf("OnChannelDrop(%s) on a store error", id)
	default:
	}
}

// TestConnectorRegistry_W5_HeartbeatKeepsAConnectorLiveElsewhere: the
// connector_id connects to b before a sees it go (a's disconnect is the
// newest record then); b's heartbeat records it live within a quarter of
// the grace, so a's expiry releases and forgets nothing.
func TestConnectorRegistry_W5_HeartbeatKeepsAConnectorLiveElsewhere(t *testing.T) {
	ctx := context.Background()
	a, b, reg, clk, dropped := replicaPair(t)
	p, done := pipeSession(t, a)
	cid := p.hello("")
	ch := p.open("")
	q, _ := pipeSession(t, b)
	q.hello(cid)
	q.open(ch)
	require.NoError(t, p.c.Close())
	<-done
	for range heartbeatsPerGrace + 1 {
		clk.Advance(DefaultOfflineGrace / heartbeatsPerGrace)
	}
	require.Eventually(t, func() bool { return a.Channel(ch) == nil }, wait, time.Millisecond)
	known, _ := reg.Known(ctx, ch)
	require.True(t, known, "the channel live on b stays registered")
	select {
	case id := <-dropped:
		t.Fatalf("OnChannelDrop(%s) on a, though the channel lives on b", id)
	default:
	}
}

// hungRegistry is a shared registry whose SeenConnector hangs until its
// context ends, as a store that stopped answering.
type hungRegistry struct {
	*sharedRegistry
	entered chan struct{}
}

func (r *hungRegistry) SeenConnector(ctx context.Context, _ string, _ time.Time) error {
	select {
	case r.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestConnectorRegistry_W5_HungStoreDoesNotHoldClose: the heartbeat's
// write to a hung shared registry is bounded by the heartbeat interval, so
// Close, which waits for a running heartbeat, returns.
func TestConnectorRegistry_W5_HungStoreDoesNotHoldClose(t *testing.T) {
	clk := fakeclock.New(t0)
	reg := &hungRegistry{sharedRegistry: newSharedRegistry(), entered: make(chan struct{}, 1)}
	const grace = 40 * time.Millisecond // the bound is grace/heartbeatsPerGrace of real time
	srv, err := NewServer(ServerConfig{
		Card:         testCard(),
		NewTarget:    func(string) imv2.Target { return newRecTarget() },
		Clock:        clk,
		Registry:     reg,
		OfflineGrace: grace,
	})
	require.NoError(t, err)
	p, _ := pipeSession(t, srv)
	p.hello("") // its SeenConnector hangs until the bound too
	<-reg.entered
	clk.Advance(grace / heartbeatsPerGrace) // a heartbeat starts and hangs in the store
	<-reg.entered
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("Close still waits for a heartbeat hung in the store")
	}
}
