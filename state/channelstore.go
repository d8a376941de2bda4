package state

import (
	"context"
	"slices"
	"sync"

	"github.com/xagentkit/imv2"
)

// ChannelStore keeps what the xAgent side must remember across reconnects
// and restarts (W11): the last connector_id and the IDs of the channels to
// reopen. A durable implementation lets a restarted process reopen its
// channels with their stored IDs. Implementations must be safe for
// concurrent use.
type ChannelStore interface {
	ConnectorID(ctx context.Context) (string, error)
	SetConnectorID(ctx context.Context, id string) error
	// ChannelIDs returns the channels to reopen, in the order added.
	ChannelIDs(ctx context.Context) ([]string, error)
	AddChannel(ctx context.Context, id string) error
	RemoveChannel(ctx context.Context, id string) error
}

// DefaultChannelStoreCap bounds the channel IDs a MemoryChannelStore
// holds: the Client's default bound on channels
// (dataplane.DefaultMaxChannels, 1,000).
const DefaultChannelStoreCap = 1000

// MemoryChannelStore is the in-memory ChannelStore, the default. It holds
// at most its cap of channel IDs; AddChannel beyond it fails. Entries have
// no TTL: they are the caller's bindings, removed by the
// dataplane Client's CloseChannel.
type MemoryChannelStore struct {
	mu          sync.Mutex
	capacity    int
	connectorID string
	ids         []string            // in the order added
	has         map[string]struct{} // the same IDs: AddChannel is O(1), not O(channels)
}

// NewMemoryChannelStore returns an empty store holding at most capacity
// channel IDs (DefaultChannelStoreCap when capacity ≤ 0).
func NewMemoryChannelStore(capacity int) *MemoryChannelStore {
	if capacity <= 0 {
		capacity = DefaultChannelStoreCap
	}
	return &MemoryChannelStore{capacity: capacity}
}

// ConnectorID implements ChannelStore.
func (s *MemoryChannelStore) ConnectorID(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connectorID, nil
}

// SetConnectorID implements ChannelStore.
func (s *MemoryChannelStore) SetConnectorID(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connectorID = id
	return nil
}

// ChannelIDs implements ChannelStore.
func (s *MemoryChannelStore) ChannelIDs(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids), nil
}

// AddChannel implements ChannelStore; adding a present ID is a no-op.
func (s *MemoryChannelStore) AddChannel(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.has[id]; ok {
		return nil
	}
	if len(s.ids) >= s.capacity {
		return imv2.Errorf(imv2.CodeChannelUnavailable, "channel store holds %d channels, its cap", s.capacity)
	}
	if s.has == nil {
		s.has = map[string]struct{}{}
	}
	s.has[id] = struct{}{}
	s.ids = append(s.ids, id)
	return nil
}

// RemoveChannel implements ChannelStore.
func (s *MemoryChannelStore) RemoveChannel(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.has[id]; !ok {
		return nil
	}
	delete(s.has, id)
	if i := slices.Index(s.ids, id); i >= 0 {
		s.ids = slices.Delete(s.ids, i, i+1)
	}
	return nil
}
