package state

import (
	"context"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
)

// ChannelRegistry remembers the connector_channel_ids a Server issued, so
// that a restarted Connector reuses a channel xAgent reopens with its
// stored ID (W5) — and with it the channel's durable pending and completed
// state (S8) — instead of issuing a new ID. Channel IDs live in the
// namespace of the Card, not of one connector_id (Common Protocol §8.3).
//
// Only IDs the Server generated are registered, so the registry grows with
// channels created, never with remote input. boltstore.Store implements it.
type ChannelRegistry interface {
	// Known reports whether channelID was registered.
	Known(ctx context.Context, channelID string) (bool, error)
	// Register records a newly issued channel ID.
	Register(ctx context.Context, channelID string) error
	// Forget removes a channel the Server dropped for good (its
	// connector_id stayed offline past the grace, or it was evicted).
	Forget(ctx context.Context, channelID string) error
}

// DefaultRegistryCap bounds a MemoryRegistry.
const DefaultRegistryCap = 100_000

// MemoryRegistry is a ChannelRegistry for one process lifetime, bounded by
// a cap: beyond it Register fails and channel.open is refused with
// connector_channel_unavailable.
type MemoryRegistry struct {
	mu  sync.Mutex
	cap int
	ids map[string]struct{}
}

// NewMemoryRegistry returns a registry of at most capacity IDs
// (DefaultRegistryCap when ≤ 0).
func NewMemoryRegistry(capacity int) *MemoryRegistry {
	if capacity <= 0 {
		capacity = DefaultRegistryCap
	}
	return &MemoryRegistry{cap: capacity, ids: map[string]struct{}{}}
}

// Known implements ChannelRegistry.
func (r *MemoryRegistry) Known(_ context.Context, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok, nil
}

// Register implements ChannelRegistry.
func (r *MemoryRegistry) Register(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ids[id]; ok {
		return nil
	}
	if len(r.ids) >= r.cap {
		return imv2.Errorf(imv2.CodeChannelUnavailable, "channel registry holds %d IDs, its cap", r.cap)
	}
	r.ids[id] = struct{}{}
	return nil
}

// Forget implements ChannelRegistry.
func (r *MemoryRegistry) Forget(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ids, id)
	return nil
}

// Len returns the number of IDs registered.
func (r *MemoryRegistry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// ConnectorRegistry is an optional capability of a ChannelRegistry that
// several Connector replicas share (the data plane's Server finds it by
// type assertion; pgstore.Store implements it). It keeps the connector_ids the replicas issued and when
// each was last connected or disconnected anywhere, so that
//   - a hello to any replica with a connector_id another replica issued
//     keeps that connector_id (Common Protocol §8.1) instead of getting a
//     new one, and the channels it reopens resume (W5);
//   - a replica whose offline grace for a connector_id runs out, while
//     the connector_id has been connected to another replica since (a
//     live connection is recorded every quarter of the grace), closes its
//     own copies of the channels and forgets nothing shared: no
//     Registry.Forget, no Channel.Drop, no OnChannelDrop (the grace of
//     Common Protocol §8.2 runs from the last connection on any replica).
//
// Implementations must be safe for concurrent use by goroutines and
// processes, and bound what they keep (cap and TTL).
type ConnectorRegistry interface {
	ChannelRegistry
	// SeenConnector records that connectorID connected, or lost its last
	// connection, on this replica at t.
	SeenConnector(ctx context.Context, connectorID string, t time.Time) error
	// ConnectorSeen returns when connectorID was last seen by any replica;
	// ok is false for an ID never recorded, forgotten or trimmed.
	ConnectorSeen(ctx context.Context, connectorID string) (t time.Time, ok bool, err error)
	// ForgetConnector removes connectorID: its grace ran out everywhere.
	ForgetConnector(ctx context.Context, connectorID string) error
}
