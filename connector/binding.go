package connector

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// Binding ties a connector_channel_id to a conversation on the platform:
// the result of a sign-in flow (a bot token and a chat ID), or of
// Options.DefaultConversation for a Card without auth flows. Finals of the
// channel go to the conversation, and inbound events of the conversation
// become user messages on the channel (Connector.Receive).
type Binding struct {
	ChannelID string
	// Key is the platform's conversation ID, opaque to the SDK: at most
	// imv2.MaxIDBytes, no 0x00 byte.
	Key string
	// Target fills the Descriptor's target (display_name, account_hint);
	// empty fields take the Server's defaults from the Card.
	Target protocol.DescriptorTarget
	// State is what the Descriptor's connection.status reports.
	State BindingState
	// Created is when the binding was made.
	Created time.Time
}

// BindingState is the state of a binding, reported as the Descriptor's
// connection.status. A channel without a binding is "created".
type BindingState string

// Binding states.
const (
	// BindingConnected: signed in; messages flow (status connected).
	BindingConnected BindingState = protocol.StatusConnected
	// BindingExpired: the platform credentials expired; the channel must
	// sign in again (status expired). Finals are refused for good.
	BindingExpired BindingState = protocol.StatusExpired
)

// BindingStore keeps the bindings, durably for a Connector that restarts:
// boltstore.Store implements it in the file of its pending and completed
// state. One channel has at most one binding; one key may be bound to many
// channels. Implementations are safe for concurrent use and pass
// storetest.TestBindingStore.
type BindingStore interface {
	// Bind creates or replaces the binding of b.ChannelID.
	Bind(ctx context.Context, b Binding) error
	// Binding returns the channel's binding; found is false without one.
	Binding(ctx context.Context, channelID string) (b Binding, found bool, err error)
	// Unbind removes the channel's binding and returns it; found is false
	// when there was none (not an error).
	Unbind(ctx context.Context, channelID string) (b Binding, found bool, err error)
	// Channels returns the IDs of the channels bound to key, sorted.
	Channels(ctx context.Context, key string) ([]string, error)
}

// DefaultMaxBindings bounds a MemoryBindingStore.
const DefaultMaxBindings = 100_000

// CheckBinding reports whether b may be stored: channel ID and key
// non-empty, at most imv2.MaxIDBytes, without 0x00 (stores use it as a
// separator); a known State.
func CheckBinding(b Binding) error {
	for _, f := range [...]struct{ name, v string }{{"channel ID", b.ChannelID}, {"conversation key", b.Key}} {
		if f.v == "" || len(f.v) > imv2.MaxIDBytes || strings.IndexByte(f.v, 0) >= 0 {
			return imv2.Errorf(imv2.CodeInvalidPacket, "connector: binding %s must be 1 to %d bytes without 0x00", f.name, imv2.MaxIDBytes)
		}
	}
	if b.State != BindingConnected && b.State != BindingExpired {
		return imv2.Errorf(imv2.CodeInvalidPacket, "connector: binding state %q is not connected or expired", b.State)
	}
	return nil
}

// MemoryBindingStore is the in-memory BindingStore, the default: bindings
// last as long as the process. It holds at most its cap; Bind of a new
// channel beyond it fails. Bindings have no TTL: the kit removes them when
// their channel is unbound or dropped, and channel IDs are issued by the
// Server, never taken from remote input.
type MemoryBindingStore struct {
	mu       sync.Mutex
	capacity int
	byCh     map[string]Binding
	byKey    map[string]map[string]struct{}
}

// NewMemoryBindingStore returns an empty store of at most capacity
// bindings (DefaultMaxBindings when ≤ 0).
func NewMemoryBindingStore(capacity int) *MemoryBindingStore {
	if capacity <= 0 {
		capacity = DefaultMaxBindings
	}
	return &MemoryBindingStore{capacity: capacity, byCh: map[string]Binding{}, byKey: map[string]map[string]struct{}{}}
}

// Bind implements BindingStore.
func (s *MemoryBindingStore) Bind(_ context.Context, b Binding) error {
	if err := CheckBinding(b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.byCh[b.ChannelID]
	if !had && len(s.byCh) >= s.capacity {
		return imv2.Errorf(imv2.CodeChannelUnavailable, "connector: %d bindings, the cap", s.capacity)
	}
	if had {
		s.dropKeyLocked(old)
	}
	s.byCh[b.ChannelID] = b
	chans := s.byKey[b.Key]
	if chans == nil {
		chans = map[string]struct{}{}
		s.byKey[b.Key] = chans
	}
	chans[b.ChannelID] = struct{}{}
	return nil
}

// Binding implements BindingStore.
func (s *MemoryBindingStore) Binding(_ context.Context, channelID string) (Binding, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byCh[channelID]
	return b, ok, nil
}

// Unbind implements BindingStore.
func (s *MemoryBindingStore) Unbind(_ context.Context, channelID string) (Binding, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byCh[channelID]
	if ok {
		delete(s.byCh, channelID)
		s.dropKeyLocked(b)
	}
	return b, ok, nil
}

// Channels implements BindingStore.
func (s *MemoryBindingStore) Channels(_ context.Context, key string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.byKey[key]))
	for id := range s.byKey[key] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (s *MemoryBindingStore) dropKeyLocked(b Binding) {
	if chans := s.byKey[b.Key]; chans != nil {
		delete(chans, b.ChannelID)
		if len(chans) == 0 {
			delete(s.byKey, b.Key)
		}
	}
}
