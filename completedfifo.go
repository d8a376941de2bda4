package imv2

import "hash/maphash"

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
// A record removed out of order (DropChannel, a re-record) leaves a stale
// slot in the ring, skipped when it reaches the front and dropped when
// the ring fills with a quarter or more of them, so the ring stays within
// a constant factor of the records (see push).
//
// onEvict, if not nil, is called with every key that leaves, however it
// leaves.
type recordFIFO struct {
	capacity int
	onEvict  func(completedKey)
	seed     maphash.Seed
	table    []tableEntry     // open addressing; 0 empty
	vals     []fifoRecord     // the records, reused through free
	free     []int32          // indexes of vals not in use
	chans    map[string]int32 // channel → its newest record in vals
	chanDel  int              // deletes from chans since it was made (mapcompact.go)
	ring     []fifoSlot       // a circular buffer: n slots from head, oldest first
	head     int
	n        int
	len      int    // records held
	stale    int    // slots of the n whose record left out of order
	seq      uint64 // counts the records added: a slot is live while its record has its seq
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

// fifoRecord is a record with its key; seq 0 marks a free one.
type fifoRecord struct {
	k          completedKey
	r          completedRecord
	seq        uint64
	hash       uint64
	prev, next int32 // the other records of its channel, newer and older; -1 none
}

func newRecordFIFO(capacity int, onEvict func(completedKey)) *recordFIFO {
	return &recordFIFO{capacity: capacity, onEvict: onEvict, seed: maphash.MakeSeed(), chans: map[string]int32{}}
}

func (f *recordFIFO) hash(k completedKey) uint64 {
	return maphash.String(f.seed, k.message) ^ maphash.String(f.seed, k.channel)*0x9e3779b97f4a7c15
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
			if v := &f.vals[e.at()]; v.hash == h && v.k == k {
				return int(i), e.at()
			}
		}
	}
}

// position returns the table position of record at, which is in the
// table: found by its index, with no key comparison.
func (f *recordFIFO) position(at int32) int {
	mask := uint64(len(f.table) - 1)
	for i := f.vals[at].hash & mask; ; i = (i + 1) & mask {
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
	h := f.vals[at].hash
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

// drop removes record at, found at table position pos.
func (f *recordFIFO) drop(pos int, at int32) {
	f.unplace(pos)
	v := &f.vals[at]
	if v.next >= 0 {
		f.vals[v.next].prev = v.prev
	}
	if v.prev >= 0 {
		f.vals[v.prev].next = v.next
	} else if v.next >= 0 {
		f.chans[v.k.channel] = v.next
	} else {
		delete(f.chans, v.k.channel)
		f.chanDel++
	}
	k := v.k
	*v = fifoRecord{}
	f.free = append(f.free, at)
	f.len--
	if f.onEvict != nil {
		f.onEvict(k)
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
	return f.vals[at].r, true
}

// Of returns the message IDs of the records of channel.
func (f *recordFIFO) Of(channel string) []string {
	at, ok := f.chans[channel]
	if !ok {
		return nil
	}
	var ids []string
	for ; at >= 0; at = f.vals[at].next {
		ids = append(ids, f.vals[at].k.message)
	}
	return ids
}

// Add records k as the newest (a record k had goes), then removes the
// oldest records beyond capacity.
func (f *recordFIFO) Add(k completedKey, r completedRecord) {
	h := f.hash(k)
	if pos, at := f.find(k, h); at >= 0 {
		f.drop(pos, at)
		f.stale++
	}
	f.seq++
	var at int32
	if n := len(f.free); n > 0 {
		at, f.free = f.free[n-1], f.free[:n-1]
	} else {
		at = int32(len(f.vals))
		f.vals = append(f.vals, fifoRecord{})
	}
	next := int32(-1)
	if old, ok := f.chans[k.channel]; ok {
		next = old
		f.vals[old].prev = at
	}
	f.chans[k.channel] = at
	f.vals[at] = fifoRecord{k: k, r: r, seq: f.seq, hash: h, prev: -1, next: next}
	f.insert(at)
	f.len++
	f.push(fifoSlot{seq: f.seq, at: at})
	for f.len > f.capacity {
		f.RemoveOldest()
	}
}

// compact rebuilds chans once channels coming and going have grown it
// (mapcompact.go). The store calls it between operations.
func (f *recordFIFO) compact() {
	if churned(f.chanDel, len(f.chans)) {
		f.chans, f.chanDel = rebuilt(f.chans), 0
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
	f.drop(pos, at)
	f.stale++
}

// GetOldest returns the oldest record.
func (f *recordFIFO) GetOldest() (completedKey, completedRecord, bool) {
	for f.n > 0 {
		s := f.ring[f.head]
		if f.live(s) {
			v := &f.vals[s.at]
			return v.k, v.r, true
		}
		f.popFront() // stale: its record left out of order
		f.stale--
	}
	return completedKey{}, completedRecord{}, false
}

// RemoveOldest removes the oldest record, if any.
func (f *recordFIFO) RemoveOldest() {
	_, _, ok := f.GetOldest()
	if !ok {
		return
	}
	at := f.ring[f.head].at
	f.popFront()
	f.drop(f.position(at), at)
}
