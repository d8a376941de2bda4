package dataplane

import (
	"context"
	"sync"

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

// sharedStores gives every Channel of one Server or Client the same
// default stores, so the documented caps hold across channels instead of
// multiplying per channel.
func sharedStores(o *imv2.Options) {
	if o.Pending == nil {
		o.Pending = imv2.NewMemoryPendingStore(0)
	}
	if o.Completed == nil {
		o.Completed = imv2.NewMemoryCompletedStore(0, 0, o.Clock) // nil: the system clock
	}
}
