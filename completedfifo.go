package imv2

import (
	"hash/maphash"
	"strings"
	"time"
)

// recordFIFO holds the completed records of a memoryCompletedStore in the
// order they were recorded, at most capacity of them, and indexes them by
// key and by channel. Everything lives in slices of values that grow to
// the most records ever held and are reused from then on, so a record
// costs no allocation of its own (a list element per record did, one per
// received message) and the memory does not grow with the number of
// records that passed through: a Go map churned by inserts and deletes
// keeps growing past its tombstones (mapcompact.go), so the key index is
// an open-addressing table with backward-shift deletion, which leaves no
// tombstones, and the index by channel a list through the records. A
// table entry keeps the low 32 bits of its record's hash next to the
// record's index, so probing past other records, and shifting them back
// on a delete, reads the table alone: at 100,000 records each record
// read is a cache miss.
//
// None of these slices holds a pointer, so the GC allocates them noscan
// and never marks through them: at DefaultCompletedCap they are most of
// a busy process's live heap, and a string per record (a record's key
// used to be two) made every GC cycle mark 100,000 objects. A record's
// key bytes live in keys instead, the channel ID then the message ID, in
// recording order (see allot), and its expiry is the time since the
// FIFO's base (see since).
//
// A record removed out of order (DropChannel, a re-record) leaves a stale
// slot in the ring, skipped when it reaches the front and dropped when
// the ring fills with a quarter or more of them, so the ring stays within
// a constant factor of the records (see push); its key bytes stay until
// the oldest record passes them or keys runs out of room (see relayout).
//
// onEvict, if not nil, is called with every key that leaves, however it
// leaves.
//
// It pays end to end (issue 24): with a map and container/lists instead
// (a list element per record in the FIFO and in its channel's list), a
// message acknowledged over a loopback WebSocket costs 1.3× the wall time
// and 1.16× the CPU, with 20 allocations instead of 16
// (RoundTripWS/sdk-64), and 1.5× both on one channel (ChannelsWS/ch-1).
// Medians of 8 interleaved pairs on a shared 2-core machine of
// `go test -c -o /tmp/dp.test ./dataplane` then
// `/tmp/dp.test -test.run '^$' -test.bench '^Benchmark(RoundTripWS|ChannelsWS)$' -test.benchtime 2s`.
type recordFIFO struct {
	capacity int
	onEvict  func(completedKey)
	seed     maphash.Seed
	base     time.Time // expiries are kept as the time since base (see since)
	based    bool
	table    []tableEntry // open addressing; 0 empty
	vals     []fifoRecord // the records, reused through free
	free     []int32      // indexes of vals not in use
	// chans maps a channel to its slot in heads, which holds the
	// channel's newest record in vals. The map is written only when a
	// channel comes (with a copy of its name) or goes: assigning to an
	// existing string key stores the new key string, which would keep
	// the caller's (a packet's buffer) for the records' TTL.
	chans     map[string]int32
	heads     []int32 // by slot: the channel's newest record
	tails     []int32 // by slot: the channel's oldest record
	counts    []int32 // by slot: the channel's records
	hog       int32   // a slot with the most records, as far as known; -1 none (completedshare.go)
	overs     []int32 // slots that held more than their share when last counted (completedshare.go)
	freeHeads []int32 // slots of heads not in use
	// Groups of channels (a connector_id each, completedshare.go): by
	// channel slot its group's slot; by group slot the group's name (a
	// string per group, not per record) and its channels holding records.
	groups     []int32
	groupIDs   map[string]int32
	gnames     []string
	gchans     []int32
	freeGroups []int32
	ngroups    int        // groups holding records
	groupDel   int        // deletes from groupIDs since it was made (mapcompact.go)
	chanDel    int        // deletes from chans since it was made (mapcompact.go)
	ring       []fifoSlot // a circular buffer: n slots from head, oldest first
	head       int
	n          int
	len        int    // records held
	stale      int    // slots of the n whose record left out of order
	seq        uint64 // counts the records added: a slot is live while its record has its seq

	// keys is a circular buffer of the records' key bytes, oldest first,
	// each key in one piece: [keyHead, keyTail), or, once a key did not
	// fit before the end and went to the start, [keyHead, keyWrap) then
	// [0, keyTail). keyLive counts the bytes of the records held.
	keys                      []byte
	keyHead, keyTail, keyWrap int // keyWrap 0: not wrapped
	keyLive                   int
}

// tableEntry is a record's place in the key index: the low 32 bits of its
// hash (its home slot and a check that spares most key comparisons) and
// 1 + its index in vals.
type tableEntry uint64

func entryOf(h uint64, at int32) tableEntry { return tableEntry(uint64(uint32(h))<<32 | uint64(at+1)) }

// at returns the record index of e, which is not empty.
func (e tableEntry) at() int32 { return int32(uint32(e)) - 1 }

// hash returns the low 32 bits of the record's hash.
func (e tableEntry) hash() uint64 { return uint64(e >> 32) }

// fifoSlot holds no pointer, so the GC never scans the ring.
type fifoSlot struct {
	seq uint64
	at  int32
}

// fifoRecord is a record with the place of its key in keys; seq 0 marks
// a free one.
type fifoRecord struct {
	fp         Fingerprint
	expires    int64 // time since the FIFO's base (see since)
	seq        uint64
	off        int // the key: clen bytes of channel ID then mlen of message ID
	clen, mlen int
	hash       uint32 // the low bits of the key's hash: its home in the table
	prev, next int32  // the other records of its channel, newer and older; -1 none
	slot       int32  // its channel's slot in heads
}

// span is the number of bytes a record's key takes in keys: at least one,
// so keys always fills up with records and a relayout is paid for by the
// records added since the last one.
func (v *fifoRecord) span() int { return max(v.clen+v.mlen, 1) }

// since returns t as the time since f's base, the first time it is asked
// for (saturated at about ±292 years, as time.Time.Sub is): by the
// monotonic clock when both carry its reading, as Time.Before would
// compare them, so a wall-clock step does not expire the records, and
// for any clock, the zero time included.
func (f *recordFIFO) since(t time.Time) int64 {
	if !f.based {
		f.base, f.based = t, true
	}
	return int64(t.Sub(f.base))
}

func (f *recordFIFO) record(v *fifoRecord) completedRecord {
	return completedRecord{fp: v.fp, expires: f.base.Add(time.Duration(v.expires))}
}

func newRecordFIFO(capacity int, onEvict func(completedKey)) *recordFIFO {
	return &recordFIFO{capacity: capacity, onEvict: onEvict, seed: maphash.MakeSeed(), chans: map[string]int32{}, groupIDs: map[string]int32{}, hog: -1}
}

func (f *recordFIFO) hash(k completedKey) uint64 {
	return maphash.String(f.seed, k.message) ^ maphash.String(f.seed, k.channel)*0x9e3779b97f4a7c15
}

// channel and message return the bytes of record v's key.
func (f *recordFIFO) channel(v *fifoRecord) []byte { return f.keys[v.off : v.off+v.clen] }
func (f *recordFIFO) message(v *fifoRecord) []byte {
	return f.keys[v.off+v.clen : v.off+v.clen+v.mlen]
}

// key returns the key of record v, in one allocation.
func (f *recordFIFO) key(v *fifoRecord) completedKey {
	s := string(f.keys[v.off : v.off+v.clen+v.mlen])
	return completedKey{s[:v.clen], s[v.clen:]}
}

// find returns the table position and the record index of k, or -1.
func (f *recordFIFO) find(k completedKey, h uint64) (pos int, at int32) {
	if len(f.table) == 0 {
		return -1, -1
	}
	mask := uint64(len(f.table) - 1)
	low := uint64(uint32(h))
	for i := h & mask; ; i = (i + 1) & mask {
		e := f.table[i]
		if e == 0 {
			return -1, -1
		}
		if e.hash() == low {
			v := &f.vals[e.at()]
			if v.mlen == len(k.message) && v.clen == len(k.channel) &&
				string(f.message(v)) == k.message && string(f.channel(v)) == k.channel {
				return int(i), e.at()
			}
		}
	}
}

// position returns the table position of record at, which is in the
// table: found by its index, with no key comparison.
func (f *recordFIFO) position(at int32) int {
	mask := uint64(len(f.table) - 1)
	for i := uint64(f.vals[at].hash) & mask; ; i = (i + 1) & mask {
		if e := f.table[i]; e != 0 && e.at() == at {
			return int(i)
		}
	}
}

// insert puts record at, whose key is not in the table, into the table,
// doubling it first when it would be more than half full.
func (f *recordFIFO) insert(at int32) {
	if 2*(f.len+1) > len(f.table) {
		f.table = make([]tableEntry, max(16, 2*len(f.table)))
		for i := range f.vals {
			if f.vals[i].seq != 0 && int32(i) != at {
				f.place(int32(i))
			}
		}
	}
	f.place(at)
}

func (f *recordFIFO) place(at int32) {
	mask := uint64(len(f.table) - 1)
	h := uint64(f.vals[at].hash)
	i := h & mask
	for f.table[i] != 0 {
		i = (i + 1) & mask
	}
	f.table[i] = entryOf(h, at)
}

// unplace empties table position pos, moving back the entries after it
// that may no longer be found past the hole (backward-shift deletion).
func (f *recordFIFO) unplace(pos int) {
	mask := len(f.table) - 1
	i := pos
	for j := (i + 1) & mask; f.table[j] != 0; j = (j + 1) & mask {
		home := int(f.table[j].hash()) & mask // tables stay far below 2^32 slots
		if (j-home)&mask >= (j-i)&mask {      // i lies on its probe path
			f.table[i] = f.table[j]
			i = j
		}
	}
	f.table[i] = 0
}

// live reports whether slot s is the one of its key's record.
func (f *recordFIFO) live(s fifoSlot) bool { return f.vals[s.at].seq == s.seq }

// drop removes record at, found at table position pos; k is its key, or
// nil when the caller has none, so that the channel's entry in chans and
// onEvict cost no string unless they need one.
func (f *recordFIFO) drop(pos int, at int32, k *completedKey) {
	f.unplace(pos)
	v := &f.vals[at]
	f.counts[v.slot]--
	if v.next >= 0 {
		f.vals[v.next].prev = v.prev
	} else {
		f.tails[v.slot] = v.prev // it was its channel's oldest
	}
	if v.prev >= 0 {
		f.vals[v.prev].next = v.next
	} else if v.next >= 0 {
		// Not from RemoveOldest: the oldest record is its channel's oldest.
		f.heads[f.chans[string(f.channel(v))]] = v.next
	} else {
		ch := string(f.channel(v))
		f.freeHeads = append(f.freeHeads, v.slot)
		delete(f.chans, ch)
		f.chanDel++
		f.leaveGroup(f.groups[v.slot])
		if f.hog == v.slot {
			f.hog = -1
		}
	}
	var key completedKey
	if f.onEvict != nil {
		if k != nil {
			key = *k
		} else {
			key = f.key(v)
		}
	}
	f.keyLive -= v.span()
	*v = fifoRecord{}
	f.free = append(f.free, at)
	f.len--
	if f.len == 0 { // what keys holds is dead: start again at its start
		f.keyHead, f.keyTail, f.keyWrap = 0, 0, 0
	}
	if f.onEvict != nil {
		f.onEvict(key)
	}
}

// Len returns the number of records held.
func (f *recordFIFO) Len() int { return f.len }

// Peek returns the record of k.
func (f *recordFIFO) Peek(k completedKey) (completedRecord, bool) {
	_, at := f.find(k, f.hash(k))
	if at < 0 {
		return completedRecord{}, false
	}
	return f.record(&f.vals[at]), true
}

// Of returns the message IDs of the records of channel, in one string.
func (f *recordFIFO) Of(channel string) []string {
	slot, ok := f.chans[channel]
	if !ok {
		return nil
	}
	first := f.heads[slot]
	var b strings.Builder
	n := 0
	for at := first; at >= 0; at = f.vals[at].next {
		b.Write(f.message(&f.vals[at]))
		n++
	}
	all := b.String()
	ids := make([]string, 0, n)
	for at := first; at >= 0; at = f.vals[at].next {
		m := f.vals[at].mlen
		ids = append(ids, all[:m])
		all = all[m:]
	}
	return ids
}

// Add records k as the newest (a record k had goes), then removes the
// oldest records beyond capacity. A channel new to the FIFO joins group "".
func (f *recordFIFO) Add(k completedKey, r completedRecord) { f.AddIn(k, "", r) }

// AddIn is Add where a channel new to the FIFO joins group.
func (f *recordFIFO) AddIn(k completedKey, group string, r completedRecord) {
	h := f.hash(k)
	if pos, at := f.find(k, h); at >= 0 {
		f.drop(pos, at, &k)
		f.stale++
	}
	clen, mlen := len(k.channel), len(k.message)
	off := f.allot(max(clen+mlen, 1))
	copy(f.keys[off:], k.channel)
	copy(f.keys[off+clen:], k.message)
	f.seq++
	var at int32
	if n := len(f.free); n > 0 {
		at, f.free = f.free[n-1], f.free[:n-1]
	} else {
		at = int32(len(f.vals))
		f.vals = append(f.vals, fifoRecord{})
	}
	next := int32(-1)
	slot, ok := f.chans[k.channel]
	if ok {
		next = f.heads[slot]
		f.vals[next].prev = at
		f.heads[slot] = at
		f.counts[slot]++
	} else {
		g := f.joinGroup(group)
		if n := len(f.freeHeads); n > 0 {
			slot, f.freeHeads = f.freeHeads[n-1], f.freeHeads[:n-1]
			f.heads[slot], f.tails[slot], f.counts[slot], f.groups[slot] = at, at, 1, g
		} else {
			slot = int32(len(f.heads))
			f.heads = append(f.heads, at)
			f.tails = append(f.tails, at)
			f.counts = append(f.counts, 1)
			f.groups = append(f.groups, g)
		}
		f.chans[strings.Clone(k.channel)] = slot // not the caller's string: it may share a message's buffer
	}
	if f.hog < 0 || f.counts[slot] > f.counts[f.hog] {
		f.hog = slot
	}
	f.vals[at] = fifoRecord{
		fp: r.fp, expires: f.since(r.expires), seq: f.seq,
		off: off, clen: clen, mlen: mlen,
		hash: uint32(h), prev: -1, next: next, slot: slot,
	}
	f.insert(at)
	f.len++
	f.push(fifoSlot{seq: f.seq, at: at})
	for f.len > f.capacity {
		f.RemoveOldest()
	}
}

// allot returns the offset in keys of n new bytes for the newest key,
// after the newest or, when they do not fit before the end, at the start,
// if the oldest left room there. Else it lays keys out anew.
func (f *recordFIFO) allot(n int) int {
	switch {
	case f.keyWrap == 0 && f.keyTail+n <= len(f.keys):
	case f.keyWrap == 0 && n <= f.keyHead:
		f.keyWrap, f.keyTail = f.keyTail, 0
	case f.keyWrap > 0 && f.keyTail+n <= f.keyHead:
	default:
		f.relayout(n)
	}
	off := f.keyTail
	f.keyLive += n
	f.keyTail += n
	return off
}

// relayout moves the keys of the records held to a fresh buffer, oldest
// first, dropping the bytes of records that left out of order and the
// gap a key that did not fit before the end left. The buffer is at least
// twice the bytes held with n more (it doubles when they would be more
// than half of it), so a relayout is paid for by the bytes added since
// the last, and keys stays within four times the most bytes ever held.
func (f *recordFIFO) relayout(n int) {
	need := f.keyLive + n
	size := len(f.keys)
	if 2*need > size {
		size = max(2*size, 2*need, 64)
	}
	keys := make([]byte, size)
	f.dropStale()
	w := 0
	for i := range f.n {
		v := &f.vals[f.slot(i).at]
		copy(keys[w:], f.keys[v.off:v.off+v.clen+v.mlen])
		v.off = w
		w += v.span()
	}
	f.keys, f.keyHead, f.keyTail, f.keyWrap = keys, 0, w, 0
}

// release frees the key bytes of the records older than the one at,
// which left as the oldest, and its own.
func (f *recordFIFO) release(at int32) {
	v := &f.vals[at]
	end := v.off + v.span()
	if f.keyWrap > 0 && end <= f.keyTail { // it was past the wrap: all before it is free
		f.keyWrap = 0
	}
	f.keyHead = end
	if f.keyWrap > 0 && f.keyHead == f.keyWrap {
		f.keyHead, f.keyWrap = 0, 0
	}
}

// compact rebuilds chans once channels coming and going have grown it
// (mapcompact.go). The store calls it between operations.
func (f *recordFIFO) compact() {
	if churned(f.chanDel, len(f.chans)) {
		f.chans, f.chanDel = rebuilt(f.chans), 0
	}
	if churned(f.groupDel, len(f.groupIDs)) {
		f.groupIDs, f.groupDel = rebuilt(f.groupIDs), 0
	}
}

// push appends s as the newest slot, making room first: stale slots go
// when they are a quarter of the buffer or more, else it doubles. A store
// at its capacity keeps one buffer (its records and the stale slots of a
// few out-of-order removals), neither growing nor copying.
func (f *recordFIFO) push(s fifoSlot) {
	if f.n == len(f.ring) {
		if f.stale > 0 && f.stale >= f.n/4 {
			f.dropStale()
		} else {
			f.resize(max(16, 2*len(f.ring)))
		}
	}
	f.ring[(f.head+f.n)%len(f.ring)] = s
	f.n++
}

// slot returns the i-th slot from the oldest.
func (f *recordFIFO) slot(i int) *fifoSlot { return &f.ring[(f.head+i)%len(f.ring)] }

// popFront removes the oldest slot.
func (f *recordFIFO) popFront() {
	f.ring[f.head] = fifoSlot{}
	f.head = (f.head + 1) % len(f.ring)
	f.n--
}

// resize moves the slots to a buffer of size slots, oldest first.
func (f *recordFIFO) resize(size int) {
	ring := make([]fifoSlot, size)
	for i := range f.n {
		ring[i] = *f.slot(i)
	}
	f.ring, f.head = ring, 0
}

// dropStale removes the stale slots in place, keeping the order.
func (f *recordFIFO) dropStale() {
	w := 0
	for r := range f.n {
		if s := *f.slot(r); f.live(s) {
			*f.slot(w) = s
			w++
		}
	}
	for i := w; i < f.n; i++ {
		*f.slot(i) = fifoSlot{}
	}
	f.n, f.stale = w, 0
}

// Remove removes the record of k, if any.
func (f *recordFIFO) Remove(k completedKey) {
	pos, at := f.find(k, f.hash(k))
	if at < 0 {
		return
	}
	f.drop(pos, at, &k)
	f.stale++
}

// oldest returns the index of the oldest record, or -1, dropping the
// stale slots before it.
func (f *recordFIFO) oldest() int32 {
	for f.n > 0 {
		s := f.ring[f.head]
		if f.live(s) {
			return s.at
		}
		f.popFront() // stale: its record left out of order
		f.stale--
	}
	return -1
}

// GetOldest returns the oldest record and its key.
func (f *recordFIFO) GetOldest() (completedKey, completedRecord, bool) {
	at := f.oldest()
	if at < 0 {
		return completedKey{}, completedRecord{}, false
	}
	v := &f.vals[at]
	return f.key(v), f.record(v), true
}

// RemoveOldest removes the oldest record, if any.
func (f *recordFIFO) RemoveOldest() {
	at := f.oldest()
	if at < 0 {
		return
	}
	f.popFront()
	f.release(at)
	f.drop(f.position(at), at, nil)
}

// RemoveExpired removes the oldest records while now is not before their
// expiry: compared as times since the base, as converting each expiry
// back to a time.Time to compare cost some 25 ns a Record.
func (f *recordFIFO) RemoveExpired(now time.Time) {
	n := f.since(now)
	for {
		at := f.oldest()
		if at < 0 || n < f.vals[at].expires {
			return
		}
		f.RemoveOldest()
	}
}
