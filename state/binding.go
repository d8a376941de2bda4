package state

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// Binding ties a connector_channel_id to a conversation on the platform:
// the result of a sign-in flow (a bot token and a chat ID), or of the
// kit's connector.Options.DefaultConversation for a Card without auth
// flows. Finals of the channel go to the conversation, and inbound events
// of the conversation become user messages on the channel
// (connector.Connector.Receive).
type Binding struct {
	// ChannelID is the connector_channel_id bound; required.
	ChannelID string
	// Key is the platform's conversation ID, opaque to the SDK: at most
	// imv2.MaxIDBytes, no 0x00 byte.
	Key string
	// Target fills the Descriptor's target (display_name, account_hint);
	// empty fields take the Server's defaults from the Card.
	Target protocol.DescriptorTarget
	// State is what the Descriptor's connection.status reports.
	State BindingState
	// Created is when the binding was made; a zero Created is set by
	// the kit's Connector.Bind to its clock.
	Created time.Time
	// Data is private to the platform (its tokens, a sync cursor): the
	// store keeps it with the binding; the kit never sends it to xAgent
	// and never logs it. At most MaxBindingData bytes.
	Data []byte
	// Drafts are the handles of drafts the kit shows for messages not
	// final yet, oldest first, so a final arriving after a restart
	// finishes its draft instead of posting a second message. A draft
	// whose final never comes stays on the platform; its record goes when
	// MaxBindingDrafts newer ones push it out.
	Drafts []DraftHandle
}

// DraftHandle is the platform's handle of a draft shown for one message
// not final yet (a platform message ID to edit or delete).
type DraftHandle struct {
	// MessageID is the xAgent message_id: 1 to imv2.MaxIDBytes bytes.
	MessageID string
	// Handle is the platform's own: 1 to MaxDraftHandleBytes bytes.
	Handle string
}

// Bounds of a Binding, checked by CheckBinding: what a store keeps per
// channel stays small whatever the platform hands the kit.
const (
	// MaxBindingData bounds Binding.Data: 16 KiB.
	MaxBindingData = 16 << 10
	// MaxBindingDrafts bounds Binding.Drafts: 64 handles.
	MaxBindingDrafts = 64
	// MaxDraftHandleBytes bounds DraftHandle.Handle: 1 KiB.
	MaxDraftHandleBytes = 1 << 10
)

// Clone returns b with its own copies of Data and Drafts, so a store
// and its caller never share them.
func (b Binding) Clone() Binding {
	b.Data = slices.Clone(b.Data)
	b.Drafts = slices.Clone(b.Drafts)
	return b
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
	// BindingRevoked: the platform revoked the access (the bot was
	// removed from the conversation); the channel must sign in again
	// (status revoked). Finals are refused for good.
	BindingRevoked BindingState = protocol.StatusRevoked
)

// BindingStore keeps the bindings, durably for a Connector that restarts:
// boltstore.Store implements it in the file of its pending and completed
// state. One channel has at most one binding; one key may be bound to many
// channels. Implementations are safe for concurrent use and pass
// storetest.TestBindingStore.
type BindingStore interface {
	// Bind creates or replaces the binding of b.ChannelID and says what it
	// replaced; Released is true when the channel left a key that no
	// channel is bound to any more.
	Bind(ctx context.Context, b Binding) (BindingChange, error)
	// Binding returns the channel's binding; found is false without one.
	Binding(ctx context.Context, channelID string) (b Binding, found bool, err error)
	// Unbind removes the channel's binding and says what it removed;
	// Had is false when there was none (not an error). Released is true
	// when it was the last binding of its key.
	Unbind(ctx context.Context, channelID string) (BindingChange, error)
	// Channels returns the IDs of the channels bound to key, sorted.
	Channels(ctx context.Context, key string) ([]string, error)
}

// BindingUpdater is a BindingStore that changes one binding in place in
// one step, its read and its write together, so that replicas sharing
// the store cannot undo each other's changes: connector.Connector.UpdateBinding
// uses it as a compare-and-swap when the Store has it (without it, an
// UpdateBinding racing an Unbind on another replica binds the channel
// again, and of two racing UpdateBindings one change is lost: the kit's
// lock orders them in one process only). MemoryBindingStore,
// boltstore.Store and pgstore.Store implement it.
//
// A Store that wraps one of these and changes how Bind stores (a cache,
// an audit, an encryption of Data) must wrap Update as well, or hide it:
// an embedded Update is found by the type assertion and writes past the
// wrapper's Bind.
type BindingUpdater interface {
	// Update reads the binding of channelID, calls f with a copy of it (as
	// Binding returns it: the kit compares the two) and stores what f
	// leaves, with no other change of that binding in between, and
	// returns the binding as it was. found is false, and f
	// is not called, when the channel has no binding. An error from f
	// stores nothing and is returned (errors.Is finds it); a result that
	// changes ChannelID, Key or Created (rebind with Bind) or that
	// CheckBinding refuses stores nothing and fails (ApplyBindingUpdate
	// decides both). f runs inside the store's lock or transaction: it
	// must not call the store and must not block, and it may be called
	// more than once (a transaction retried after losing a race): what
	// its last call leaves is stored.
	Update(ctx context.Context, channelID string, f func(*Binding) error) (old Binding, found bool, err error)
}

// ApplyBindingUpdate is the step every BindingUpdater takes inside its
// lock or transaction: it calls f with a copy of old (Data and Drafts of
// its own) and returns what f left, if it may be stored: f's error
// otherwise, or an error when f changed ChannelID, Key or Created (what
// identifies a binding) or left one CheckBinding refuses.
func ApplyBindingUpdate(old Binding, f func(*Binding) error) (Binding, error) {
	b := old.Clone()
	if err := f(&b); err != nil {
		return Binding{}, err
	}
	if b.ChannelID != old.ChannelID || b.Key != old.Key || !b.Created.Equal(old.Created) {
		return Binding{}, errors.New("state: an update changed the binding's channel ID, key or creation time; rebind with Bind")
	}
	if err := CheckBinding(b); err != nil {
		return Binding{}, err
	}
	return b, nil
}

// Equal reports whether b and o are the same binding with the same
// contents (an empty Data or Drafts the same as none).
func (b Binding) Equal(o Binding) bool {
	return b.ChannelID == o.ChannelID && b.Key == o.Key && b.Target == o.Target && b.State == o.State &&
		b.Created.Equal(o.Created) && bytes.Equal(b.Data, o.Data) && slices.Equal(b.Drafts, o.Drafts)
}

// BindingChange is what a Bind or Unbind changed.
type BindingChange struct {
	// Old is the channel's binding before the change; zero without one.
	Old Binding
	// Had reports whether the channel had a binding before.
	Had bool
	// Released reports that Old.Key has no binding left after the change:
	// the channel left it (an Unbind, or a Bind to another key) and was
	// its last. The store decides it in the transaction (or under the
	// lock) that makes the change, never from a separate read, so of any
	// number of concurrent changes exactly one releases a key each time
	// its count of bindings goes to zero, and the kit tells the Releaser
	// exactly then.
	Released bool
}

// DefaultMaxBindings bounds a MemoryBindingStore.
const DefaultMaxBindings = 100_000

// CheckBinding reports whether b may be stored: channel ID and key
// non-empty, at most imv2.MaxIDBytes, without 0x00 (stores use it as a
// separator); a known State; Data of at most MaxBindingData bytes; at
// most MaxBindingDrafts drafts, each with a message ID of 1 to
// imv2.MaxIDBytes bytes and a handle of 1 to MaxDraftHandleBytes.
func CheckBinding(b Binding) error {
	for _, f := range [...]struct{ name, v string }{{"channel ID", b.ChannelID}, {"conversation key", b.Key}} {
		if f.v == "" || len(f.v) > imv2.MaxIDBytes || strings.IndexByte(f.v, 0) >= 0 {
			return imv2.Errorf(imv2.CodeInvalidPacket, "state: binding %s must be 1 to %d bytes without 0x00", f.name, imv2.MaxIDBytes)
		}
	}
	switch b.State {
	case BindingConnected, BindingExpired, BindingRevoked:
	default:
		return imv2.Errorf(imv2.CodeInvalidPacket, "state: binding state %q is not connected, expired or revoked", b.State)
	}
	if len(b.Data) > MaxBindingData {
		return imv2.Errorf(imv2.CodeInvalidPacket, "state: binding data of %d bytes; at most %d", len(b.Data), MaxBindingData)
	}
	if len(b.Drafts) > MaxBindingDrafts {
		return imv2.Errorf(imv2.CodeInvalidPacket, "state: %d draft handles; at most %d", len(b.Drafts), MaxBindingDrafts)
	}
	for _, d := range b.Drafts {
		if d.MessageID == "" || len(d.MessageID) > imv2.MaxIDBytes {
			return imv2.Errorf(imv2.CodeInvalidPacket, "state: draft message ID must be 1 to %d bytes", imv2.MaxIDBytes)
		}
		if d.Handle == "" || len(d.Handle) > MaxDraftHandleBytes {
			return imv2.Errorf(imv2.CodeInvalidPacket, "state: draft handle must be 1 to %d bytes", MaxDraftHandleBytes)
		}
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

var _ BindingUpdater = (*MemoryBindingStore)(nil)

// NewMemoryBindingStore returns an empty store of at most capacity
// bindings (DefaultMaxBindings when ≤ 0).
func NewMemoryBindingStore(capacity int) *MemoryBindingStore {
	if capacity <= 0 {
		capacity = DefaultMaxBindings
	}
	return &MemoryBindingStore{capacity: capacity, byCh: map[string]Binding{}, byKey: map[string]map[string]struct{}{}}
}

// Bind implements BindingStore.
func (s *MemoryBindingStore) Bind(_ context.Context, b Binding) (BindingChange, error) {
	if err := CheckBinding(b); err != nil {
		return BindingChange{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.byCh[b.ChannelID]
	if !had && len(s.byCh) >= s.capacity {
		return BindingChange{}, imv2.Errorf(imv2.CodeChannelUnavailable, "state: %d bindings, the cap", s.capacity)
	}
	ch := BindingChange{Old: old, Had: had}
	if had {
		ch.Released = s.dropKeyLocked(old) && old.Key != b.Key
	}
	s.byCh[b.ChannelID] = b.Clone()
	chans := s.byKey[b.Key]
	if chans == nil {
		chans = map[string]struct{}{}
		s.byKey[b.Key] = chans
	}
	chans[b.ChannelID] = struct{}{}
	return ch, nil
}

// Binding implements BindingStore.
func (s *MemoryBindingStore) Binding(_ context.Context, channelID string) (Binding, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byCh[channelID]
	return b.Clone(), ok, nil
}

// Update implements BindingUpdater; f runs under the store's lock.
func (s *MemoryBindingStore) Update(_ context.Context, channelID string, f func(*Binding) error) (Binding, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.byCh[channelID]
	if !ok {
		return Binding{}, false, nil
	}
	b, err := ApplyBindingUpdate(old, f)
	if err != nil {
		return old.Clone(), true, err
	}
	s.byCh[channelID] = b // b's Data and Drafts are its own
	return old, true, nil // and old's are no longer the store's
}

// Unbind implements BindingStore.
func (s *MemoryBindingStore) Unbind(_ context.Context, channelID string) (BindingChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byCh[channelID]
	if !ok {
		return BindingChange{}, nil
	}
	delete(s.byCh, channelID)
	return BindingChange{Old: b, Had: true, Released: s.dropKeyLocked(b)}, nil
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

// dropKeyLocked removes b's channel from its key's set and reports
// whether the set is empty now.
func (s *MemoryBindingStore) dropKeyLocked(b Binding) (last bool) {
	chans := s.byKey[b.Key]
	delete(chans, b.ChannelID)
	if len(chans) == 0 {
		delete(s.byKey, b.Key)
		return true
	}
	return false
}
