package imv2

import (
	"context"
	"slices"
	"sync"
	"time"
)

// PendingEntry is one complete message the sender has sent (or is about to
// send) and for which no terminal ack arrived yet (S1).
type PendingEntry struct {
	ChannelID string
	// Message is resent verbatim: same message_id, same content (S2, A7).
	Message ChatMessage
	// Created is when the message entered the queue; the entry expires
	// Options.PendingTTL later, unless that is negative (no age limit).
	Created time.Time
}

// PendingStore keeps the sender's pending messages (S1). An entry is added
// before the first send and removed only on a terminal ack (accepted,
// duplicate, or rejected with retryable=false) or on expiry (Options.PendingTTL,
// which can be turned off), which is reported, never silent. It is a fact of its own, independent of the
// receiver's CompletedStore (S9).
//
// Implementations must be safe for concurrent use. A durable one writes
// Add before returning, so a crash right after the first send still
// resends after restart.
//
// A method may keep its ctx after it returned (a write-behind flush with
// context.WithoutCancel(ctx), a trace span): the Channel assumes nothing
// of what a store does with ctx, and a kept ctx stays that call's.
type PendingStore interface {
	// Add records e. It returns an *Error with code pending_full when the
	// channel already holds its cap; nothing is dropped to make room.
	// Adding a message_id already pending replaces nothing and returns
	// message_id_conflict if the content differs.
	Add(ctx context.Context, e PendingEntry) error
	// Remove forgets a message after its terminal ack or expiry.
	Remove(ctx context.Context, channelID, messageID string) error
	// List returns the channel's pending entries, oldest first.
	List(ctx context.Context, channelID string) ([]PendingEntry, error)
}

// Defaults of the sender's pending queue.
const (
	// DefaultPendingCap bounds pending messages per channel.
	DefaultPendingCap = 1000
	// defaultPendingTTL is how long a message stays pending without a
	// terminal ack before it fails with code "expired".
	defaultPendingTTL = time.Hour
)

// memoryPendingStore is what NewMemoryPendingStore returns.
type memoryPendingStore struct {
	mu       sync.Mutex
	capacity int
	channels map[string]*pendingList
	// spare is the list of a channel that emptied, cleared, for the next
	// channel that needs one: a channel with one message at a time
	// empties its list on every ack. One spare per store: bounded.
	spare *pendingList
}

// maxSparePending bounds the list kept as spare: one that held more
// entries (a large map) is dropped with its channel.
const maxSparePending = 128

type pendingList struct {
	order []string // message IDs, oldest first
	byID  map[string]PendingEntry
}

// NewMemoryPendingStore returns an in-memory PendingStore holding at most
// capacity entries per channel (DefaultPendingCap when capacity ≤ 0). It
// never evicts: a full channel refuses Add, so the caller gets backpressure
// instead of silent loss.
func NewMemoryPendingStore(capacity int) PendingStore { return newMemoryPendingStore(capacity) }

func newMemoryPendingStore(capacity int) *memoryPendingStore {
	if capacity <= 0 {
		capacity = DefaultPendingCap
	}
	return &memoryPendingStore{capacity: capacity}
}

// Add implements PendingStore.
func (s *memoryPendingStore) Add(_ context.Context, e PendingEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.channels[e.ChannelID]
	if l == nil {
		if s.channels == nil { // made on first use: an idle channel's store holds no map
			s.channels = map[string]*pendingList{}
		}
		if l, s.spare = s.spare, nil; l == nil {
			l = &pendingList{byID: map[string]PendingEntry{}}
		}
		s.channels[e.ChannelID] = l
	}
	if old, ok := l.byID[e.Message.MessageID]; ok {
		if FingerprintOf(&old.Message) != FingerprintOf(&e.Message) {
			return Errorf(CodeMessageIDConflict, "message_id %q is pending with other content (M2)", e.Message.MessageID)
		}
		return nil
	}
	if len(l.order) >= s.capacity {
		return Errorf(CodePendingFull, "channel %q has %d pending messages, the cap", e.ChannelID, s.capacity)
	}
	e.Message.Files = slices.Clone(e.Message.Files) // the caller may reuse its slice
	l.order = append(l.order, e.Message.MessageID)
	l.byID[e.Message.MessageID] = e
	return nil
}

// Remove implements PendingStore.
func (s *memoryPendingStore) Remove(_ context.Context, channelID, messageID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.channels[channelID]
	if l == nil {
		return nil
	}
	if _, ok := l.byID[messageID]; !ok {
		return nil
	}
	delete(l.byID, messageID)
	for i, id := range l.order {
		if id == messageID {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	if len(l.order) == 0 {
		delete(s.channels, channelID)
		if cap(l.order) <= maxSparePending { // a list that held many is dropped: its map stays large
			clear(l.order[:cap(l.order)]) // no IDs kept alive
			l.order = l.order[:0]
			s.spare = l
		}
	}
	return nil
}

// List implements PendingStore.
func (s *memoryPendingStore) List(_ context.Context, channelID string) ([]PendingEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.channels[channelID]
	if l == nil {
		return nil, nil
	}
	out := make([]PendingEntry, 0, len(l.order))
	for _, id := range l.order {
		out = append(out, l.byID[id])
	}
	return out, nil
}

// Len returns the number of pending entries of a channel.
func (s *memoryPendingStore) Len(channelID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.channels[channelID]; l != nil {
		return len(l.order)
	}
	return 0
}

// inline declares the in-memory pending store inline (storeoffreader.go):
// its calls do no I/O and never wait on their context.
func (*memoryPendingStore) inline() {}
