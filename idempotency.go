package imv2

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/xagentkit/imv2/clock"
)

// Fingerprint identifies the full content of a message: its text and its
// whole file list (S6). Two transmissions with one message_id and equal
// fingerprints are the same message; unequal ones are a conflict.
type Fingerprint [32]byte

// FingerprintOf returns the SHA-256 of an unambiguous, length-prefixed
// encoding of m's text and every field of every file, in order.
// CreatedAt is left out: a resend may stamp a new time but is the same message.
func FingerprintOf(m *ChatMessage) Fingerprint {
	// The encoding goes into one buffer hashed at once: on the stack for a
	// message of a few hundred bytes, so hashing allocates nothing.
	var stack [512]byte
	b := stack[:0]
	str := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(v int64) { b = binary.BigEndian.AppendUint64(b, uint64(v)) }
	str(m.Text)
	num(int64(len(m.Files)))
	for i := range m.Files {
		f := &m.Files[i]
		str(string(f.Type))
		str(f.FileRef)
		str(f.Filename)
		str(f.MimeType)
		num(f.ByteSize)
		num(f.ExpiresAt)
		str(f.DownloadURL)
	}
	return Fingerprint(sha256.Sum256(b))
}

// CompletedStore is the receiver's record of messages whose target side
// effects completed (S6): message_id → Fingerprint, per channel. It is a
// fact of its own, never the sender's pending queue (S9), and sending the
// ack does not delete a record.
//
// Record must make the record durable before it returns when the store is
// durable, because the accepted ack leaves right after it (S8).
// Implementations must be safe for concurrent use.
type CompletedStore interface {
	// Lookup returns the fingerprint recorded for the message, if any.
	Lookup(ctx context.Context, channelID, messageID string) (Fingerprint, bool, error)
	// Record stores the message as completed.
	Record(ctx context.Context, channelID, messageID string, fp Fingerprint) error
	// DropChannel forgets every record of a permanently deleted channel (S7).
	DropChannel(ctx context.Context, channelID string) error
	// Handover copies every live record of channel from to channel to,
	// keeping each record's age, when the Connector answered a reopen of
	// from with the new ID to: the sender resends from's pending messages
	// there, and those already completed must be answered duplicate, not
	// posted again (dedup follows the message, not the ID). from keeps its
	// records; an unknown from copies nothing.
	Handover(ctx context.Context, from, to string) error
}

// Defaults of memoryCompletedStore.
const (
	// DefaultCompletedCap bounds the records kept across all channels.
	DefaultCompletedCap = 100_000
	// DefaultCompletedTTL is how long a record is kept. It outlives the
	// sender's pending TTL (Options.PendingTTL), so every resend a sender
	// may make still finds the record.
	DefaultCompletedTTL = 24 * time.Hour
)

// memoryCompletedStore is what NewMemoryCompletedStore returns.
type memoryCompletedStore struct {
	mu       sync.Mutex
	capacity int
	ttl      time.Duration
	clock    clock.Clock
	// lru is used as a FIFO (Peek never promotes), so its oldest entry is
	// also the one that expires first. It is made by the first Record, so
	// the store of an idle channel costs a few words.
	lru *simplelru.LRU[completedKey, completedRecord]
	// claims are the messages whose side effect is running (ClaimStore,
	// claimmemory.go); Record and DropChannel remove them.
	claims map[completedKey]claimRecord
}

type completedKey struct{ channel, message string }

type completedRecord struct {
	fp      Fingerprint
	expires time.Time
}

// NewMemoryCompletedStore returns a bounded in-memory CompletedStore (it is
// also a ClaimStore): at most capacity records across all channels, each
// kept at most ttl, timed by clock; zero values take DefaultCompletedCap,
// DefaultCompletedTTL and the system clock. When full, the oldest record
// goes first. It starts no goroutine: expired records are swept on each
// Record.
//
// A record evicted by the cap or TTL can no longer stop a very late resend;
// size capacity above the number of messages received in one TTL, or use a
// durable store (boltstore).
func NewMemoryCompletedStore(capacity int, ttl time.Duration, clk clock.Clock) ClaimStore {
	return newMemoryCompletedStore(capacity, ttl, clk)
}

func newMemoryCompletedStore(capacity int, ttl time.Duration, clk clock.Clock) *memoryCompletedStore {
	if capacity <= 0 {
		capacity = DefaultCompletedCap
	}
	if ttl <= 0 {
		ttl = DefaultCompletedTTL
	}
	if clk == nil {
		clk = clock.System{}
	}
	return &memoryCompletedStore{capacity: capacity, ttl: ttl, clock: clk}
}

// Lookup implements CompletedStore.
func (s *memoryCompletedStore) Lookup(_ context.Context, channelID, messageID string) (Fingerprint, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lru == nil {
		return Fingerprint{}, false, nil
	}
	r, ok := s.lru.Peek(completedKey{channelID, messageID})
	if !ok || !s.clock.Now().Before(r.expires) {
		return Fingerprint{}, false, nil
	}
	return r.fp, true, nil
}

// Record implements CompletedStore.
func (s *memoryCompletedStore) Record(_ context.Context, channelID, messageID string, fp Fingerprint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lru == nil {
		s.lru, _ = simplelru.NewLRU[completedKey, completedRecord](s.capacity, nil) // capacity > 0: no error
	}
	now := s.clock.Now()
	s.sweep(now)
	k := completedKey{channelID, messageID}
	s.lru.Remove(k) // a re-record moves to the back of the FIFO
	s.lru.Add(k, completedRecord{fp: fp, expires: now.Add(s.ttl)})
	delete(s.claims, k) // completes a claim, whoever holds it
	return nil
}

// DropChannel implements CompletedStore.
func (s *memoryCompletedStore) DropChannel(_ context.Context, channelID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.claims {
		if k.channel == channelID {
			delete(s.claims, k)
		}
	}
	if s.lru == nil {
		return nil
	}
	for _, k := range s.lru.Keys() {
		if k.channel == channelID {
			s.lru.Remove(k)
		}
	}
	return nil
}

// Handover implements CompletedStore. Copies keep their expiry, so a
// handover never extends a record's life.
func (s *memoryCompletedStore) Handover(_ context.Context, from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lru == nil || from == to {
		return nil
	}
	now := s.clock.Now()
	for _, k := range s.lru.Keys() {
		r, _ := s.lru.Peek(k)
		if k.channel != from || !now.Before(r.expires) {
			continue
		}
		nk := completedKey{to, k.message}
		s.lru.Remove(nk)
		s.lru.Add(nk, r)
	}
	return nil
}

// Len returns the number of records held, expired ones included until swept.
func (s *memoryCompletedStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lru == nil {
		return 0
	}
	return s.lru.Len()
}

func (s *memoryCompletedStore) sweep(now time.Time) {
	for {
		_, r, ok := s.lru.GetOldest()
		if !ok || now.Before(r.expires) {
			return
		}
		s.lru.RemoveOldest()
	}
}
