package imv2

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/xagentkit/imv2/clock"
)

// Fingerprint identifies the content of a message as profile §9 names it:
// its full text and its file list (S6). Two transmissions with one
// message_id and equal fingerprints are the same message; unequal ones are
// a conflict.
type Fingerprint [32]byte

// FingerprintOf returns the SHA-256 of an unambiguous, length-prefixed
// encoding of m's text and, per file in order, its type, file_ref,
// filename, MIME type and byte size: the file as a message carries it.
// CreatedAt, a file's download_url and its expires_at are left out: a
// resend may stamp a new time or carry a freshly signed URL and is still
// the same message (S6).
//
// The encoding starts with a version byte. Fingerprints stored by a
// version before it (which also hashed download_url and expires_at)
// differ from these for the same message; the Channel still takes them
// (sameContent), so durable records stay valid across the change.
func FingerprintOf(m *ChatMessage) Fingerprint {
	return fingerprint(m, false)
}

// fingerprintVersion prefixes the encoding FingerprintOf hashes; the
// encoding before it had no prefix.
const fingerprintVersion = 2

// fingerprint hashes m's content; legacy hashes the encoding stored
// before fingerprintVersion: every field of every file, no prefix.
func fingerprint(m *ChatMessage, legacy bool) Fingerprint {
	// The encoding goes into one buffer hashed at once: on the stack for a
	// message of a few hundred bytes, so hashing allocates nothing.
	var stack [512]byte
	b := stack[:0]
	str := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(v int64) { b = binary.BigEndian.AppendUint64(b, uint64(v)) }
	if !legacy {
		b = append(b, fingerprintVersion)
	}
	str(m.Text)
	num(int64(len(m.Files)))
	for i := range m.Files {
		f := &m.Files[i]
		str(string(f.Type))
		str(f.FileRef)
		str(f.Filename)
		str(f.MimeType)
		num(f.ByteSize)
		if legacy {
			num(f.ExpiresAt)
			str(f.DownloadURL)
		}
	}
	return Fingerprint(sha256.Sum256(b))
}

// sameContent reports whether fp, a fingerprint a store kept for a
// message_id, names the content of m: FingerprintOf(m), or the fingerprint
// a version before the current encoding stored for it. It is how stored
// records are compared with a message received or sent again (S6).
func sameContent(fp Fingerprint, m *ChatMessage) bool {
	return fp == FingerprintOf(m) || fp == fingerprint(m, true)
}

// CompletedStore is the receiver's record of messages whose target side
// effects completed (S6): message_id → Fingerprint, per channel. It is a
// fact of its own, never the sender's pending queue (S9), and sending the
// ack does not delete a record.
//
// Record must make the record durable before it returns when the store is
// durable, because the accepted ack leaves right after it (S8).
// Implementations must be safe for concurrent use.
//
// A method may keep its ctx after it returned (a write-behind flush with
// context.WithoutCancel(ctx), a trace span): the Channel assumes nothing
// of what a store does with ctx, and a kept ctx stays that call's.
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
	// posted again (dedup follows the message, not the ID). A ClaimStore
	// copies from's claims too, as they are (content, owner, lease), so a
	// resend of a message whose delivery was interrupted finds the orphan
	// under to, not a free message; a claim to already has stays. from
	// keeps its records and claims; an unknown from copies nothing.
	//
	// At most MaxHandoverRecords records (the newest) and as many claims
	// are copied, and a repeat of the same handover changes nothing: a
	// peer that reopens one channel again and again cannot push other
	// channels' records out of the store's cap.
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
	// MaxHandoverRecords bounds the records (and, apart, the claims) one
	// Handover copies; the newest go. It is DefaultPendingCap: a sender
	// keeps no more messages pending per channel, so no more resends can
	// follow a reopen, and a channel.open (a peer's request) never costs
	// more than this many copies.
	MaxHandoverRecords = DefaultPendingCap
)

// memoryCompletedStore is what NewMemoryCompletedStore returns: a bounded in-memory CompletedStore: at most Cap
// records across all channels, each kept at most TTL. When full, the oldest
// record goes first. It starts no goroutine: expired records are swept on
// each Record. An index by channel makes DropChannel and Handover cost the
// records of their channel only.
//
// A record evicted by the cap or TTL can no longer stop a very late resend;
// size Cap above the number of messages received in one TTL, or use a
// durable store (boltstore).
type memoryCompletedStore struct {
	mu       sync.Mutex
	capacity int
	ttl      time.Duration
	clock    clock.Clock
	// lru is the records in recording order (completedfifo.go), so its
	// oldest entry is also the one that expires first, indexed by key and
	// by channel. It is made by the first Record, so the store of an idle
	// channel costs a few words.
	lru *recordFIFO
	// claims are the messages whose side effect is running (ClaimStore,
	// claimmemory.go); Record and DropChannel remove them. claimIndex
	// indexes them by channel.
	// results are the results kept with records (state.ResultStore,
	// memresult.go); a record's leaves with it (lru's onEvict).
	results       map[completedKey][]byte
	claims        map[completedKey]claimRecord
	claimsRemoved int // deletes from claims since it was made (mapcompact.go)
	claimIndex    channelIndex
}

// channelIndex maps a channel to the message IDs it holds in a store.
// The set of a channel that empties is kept as spare for the next channel
// that needs one: a channel's claims come and go with every message, and
// a new set each time would cost two allocations per message.
type channelIndex struct {
	m       map[string]map[string]struct{}
	spare   map[string]struct{} // empty
	n       int                 // message IDs held, over all channels
	removed int                 // removals since the maps were made (mapcompact.go)
}

func (x *channelIndex) add(k completedKey) {
	if x.m == nil {
		x.m = map[string]map[string]struct{}{}
	}
	ids := x.m[k.channel]
	if ids == nil {
		ids, x.spare = x.spare, nil
		if ids == nil {
			ids = map[string]struct{}{}
		}
		x.m[k.channel] = ids
	}
	if _, ok := ids[k.message]; !ok {
		ids[k.message] = struct{}{}
		x.n++
	}
}

func (x *channelIndex) remove(k completedKey) {
	ids := x.m[k.channel]
	if _, ok := ids[k.message]; ok {
		delete(ids, k.message)
		x.n--
		x.removed++
	}
	if len(ids) == 0 {
		delete(x.m, k.channel)
		if ids != nil {
			x.spare = ids // one spare per index: what it holds is bounded
		}
	}
}

// compact rebuilds the maps once churn has grown them (mapcompact.go);
// never call it while ranging over one of them.
func (x *channelIndex) compact() {
	if !churned(x.removed, x.n+len(x.m)) {
		return
	}
	m := make(map[string]map[string]struct{}, len(x.m))
	for ch, ids := range x.m {
		m[ch] = rebuilt(ids)
	}
	x.m, x.spare, x.removed = m, nil, 0
}

// of returns the message IDs of channel (read only).
func (x *channelIndex) of(channel string) map[string]struct{} { return x.m[channel] }

type completedKey struct{ channel, message string }

type completedRecord struct {
	fp      Fingerprint
	expires time.Time
}

// NewMemoryCompletedStore returns a bounded in-memory CompletedStore (it is
// also a ClaimStarter): at most capacity records across all channels, each
// kept at most ttl, timed by clock; zero values take DefaultCompletedCap,
// DefaultCompletedTTL and the system clock. When full, the oldest record
// goes first, unless a sender may still resend it and its channel holds
// no more than its share of capacity (per connector_id first,
// Options.ConnectorID, then per channel): then the recording channel's
// own oldest record, or that of a channel over its share, goes instead,
// or a Claim is refused channel_busy (completedshare.go), so one peer's
// flood cannot make another's final show twice. It starts no goroutine: expired records are swept on each
// Record.
//
// A record evicted by the cap or TTL can no longer stop a very late resend;
// size capacity above the number of messages received in one TTL, or use a
// durable store (boltstore).
//
// Memory: a record keeps a copy of its channel and message IDs, never the
// caller's strings (which may share a decoded message's array), in
// memory that holds no pointer, so the GC does not scan it. It costs
// about 130 B plus its IDs' bytes, which take up to four times their size
// in the store's buffer: measured at 100,000 records with 40-byte IDs,
// 236 B/record (BenchmarkMemoryCompletedStore_ScanHeap). The bound, with
// both IDs at MaxIDBytes, is about 2.2 KiB per record, some 210 MiB at
// DefaultCompletedCap. A result kept with a record (state.ResultStore, by
// the data plane for a tool call) adds its bytes, at most 16 KiB.
func NewMemoryCompletedStore(capacity int, ttl time.Duration, clk clock.Clock) ClaimStarter {
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
func (s *memoryCompletedStore) Record(ctx context.Context, channelID, messageID string, fp Fingerprint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordLocked(ctx, channelID, messageID, fp)
	return nil
}

func (s *memoryCompletedStore) recordLocked(ctx context.Context, channelID, messageID string, fp Fingerprint) {
	if s.lru == nil {
		s.lru = newRecordFIFO(s.capacity, s.dropResult)
	}
	now := s.clock.Now()
	s.sweep(now)
	k := completedKey{channelID, messageID}
	s.addRecord(k, s.groupOf(ctx, channelID), completedRecord{fp: fp, expires: now.Add(s.ttl)}) // a re-record moves to the back of the FIFO
	s.deleteClaim(k)                                                                            // completes a claim, whoever holds it
	s.compact()
}

// compact rebuilds the store's maps that churn has grown
// (mapcompact.go). Record and Claim call it, as every message passes
// through one of them; never while ranging over a map.
func (s *memoryCompletedStore) compact() {
	if s.lru != nil {
		s.lru.compact()
	}
	s.claimIndex.compact()
	if churned(s.claimsRemoved, len(s.claims)) {
		s.claims, s.claimsRemoved = rebuilt(s.claims), 0
	}
}

// addRecord adds a record to the back of the FIFO, making room by the
// shares of completedshare.go when the store is full. A Claim made room
// already; a Record without one, or a Handover, that finds every
// candidate protected removes the oldest record all the same: the store
// stays within its capacity.
func (s *memoryCompletedStore) addRecord(k completedKey, group string, r completedRecord) {
	if s.lru.Len() >= s.capacity {
		if _, ok := s.lru.Peek(k); !ok && !s.makeRoom(s.clock.Now(), k.channel, group) {
			s.lru.RemoveOldest()
		}
	}
	s.lru.AddIn(k, group, r)
}

// DropChannel implements CompletedStore.
func (s *memoryCompletedStore) DropChannel(_ context.Context, channelID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.claimIndex.of(channelID) {
		s.deleteClaim(completedKey{channelID, id})
	}
	if s.lru != nil {
		for _, id := range s.lru.Of(channelID) {
			s.lru.Remove(completedKey{channelID, id})
		}
	}
	return nil
}

// Handover implements CompletedStore. It costs the records and claims of
// from, nothing when from has none. Copies keep their expiry (and claims
// their lease), so a handover never extends a record's life; they are
// added oldest first, and a copy to already holds with the same content
// and expiry stays where it is in the FIFO.
func (s *memoryCompletedStore) Handover(ctx context.Context, from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from == to {
		return nil
	}
	now := s.clock.Now()
	s.handoverClaims(now, from, to)
	if s.lru == nil {
		return nil
	}
	ids := s.lru.Of(from)
	if len(ids) == 0 {
		return nil
	}
	type copied struct {
		id string
		r  completedRecord
	}
	live := make([]copied, 0, len(ids))
	for _, id := range ids {
		if r, ok := s.lru.Peek(completedKey{from, id}); ok && now.Before(r.expires) {
			live = append(live, copied{id, r})
		}
	}
	slices.SortFunc(live, func(a, b copied) int { return a.r.expires.Compare(b.r.expires) })
	group := s.groupOf(ctx, to)
	if group == "" {
		group, _ = s.lru.groupName(from) // a call of no Channel (dataplane's handover): from's connector_id
	}
	if len(live) > MaxHandoverRecords {
		live = live[len(live)-MaxHandoverRecords:] // the newest: resends are of the latest messages
	}
	for _, c := range live {
		nk := completedKey{to, c.id}
		if old, ok := s.lru.Peek(nk); ok {
			if old.fp == c.r.fp && old.expires.Equal(c.r.expires) {
				continue // a repeated handover: already there
			}
			s.lru.Remove(nk)
		}
		s.addRecord(nk, group, c.r)
		if res, ok := s.results[completedKey{from, c.id}]; ok {
			s.results[nk] = res // never written to: shared
		}
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

func (s *memoryCompletedStore) sweep(now time.Time) { s.lru.RemoveExpired(now) }
