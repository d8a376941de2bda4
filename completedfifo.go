package imv2

// recordFIFO holds the completed records of a memoryCompletedStore in the
// order they were recorded, at most capacity of them: a map for lookups
// and a ring of keys for the order, both of values, so a record costs no
// allocation of its own (a list element per record did, one per received
// message). A record removed out of order (DropChannel, a re-record)
// leaves a stale slot behind, skipped when it reaches the front and
// dropped when the buffer fills with a quarter or more of them, so the
// buffer stays within a constant factor of the records (see push).
//
// onEvict is called with every key that leaves, however it leaves, as
// simplelru's eviction callback was (the store keeps its index by channel
// with it).
type recordFIFO struct {
	capacity int
	onEvict  func(completedKey)
	m        map[completedKey]int32 // key → its record in vals
	vals     []fifoRecord           // the records, reused through free
	free     []int32                // indexes of vals not in use
	ring     []fifoSlot             // a circular buffer: n slots from head, oldest first
	head     int
	n        int
	stale    int    // slots of the n whose record left out of order
	seq      uint64 // counts the records added: a slot is live while its record has its seq
}

// A map of small values: a map churned by inserts and deletes grows its
// tables over time, and what it grows by is its slots' size, so records
// live in vals and the map holds only their index.
type fifoSlot struct {
	k   completedKey
	seq uint64
	at  int32
}

type fifoRecord struct {
	r   completedRecord
	seq uint64
}

func newRecordFIFO(capacity int, onEvict func(completedKey)) *recordFIFO {
	return &recordFIFO{capacity: capacity, onEvict: onEvict, m: map[completedKey]int32{}}
}

// live reports whether slot s is the one of its key's record.
func (f *recordFIFO) live(s fifoSlot) bool {
	at, ok := f.m[s.k]
	return ok && at == s.at && f.vals[at].seq == s.seq
}

// drop removes the record of k at at from the map and vals.
func (f *recordFIFO) drop(k completedKey, at int32) {
	delete(f.m, k)
	f.vals[at] = fifoRecord{}
	f.free = append(f.free, at)
}

// Len returns the number of records held.
func (f *recordFIFO) Len() int { return len(f.m) }

// Peek returns the record of k.
func (f *recordFIFO) Peek(k completedKey) (completedRecord, bool) {
	at, ok := f.m[k]
	if !ok {
		return completedRecord{}, false
	}
	return f.vals[at].r, true
}

// Add records k as the newest (a record k had goes), then removes the
// oldest records beyond capacity.
func (f *recordFIFO) Add(k completedKey, r completedRecord) {
	f.Remove(k)
	f.seq++
	var at int32
	if n := len(f.free); n > 0 {
		at, f.free = f.free[n-1], f.free[:n-1]
	} else {
		at = int32(len(f.vals))
		f.vals = append(f.vals, fifoRecord{})
	}
	f.vals[at] = fifoRecord{r: r, seq: f.seq}
	f.m[k] = at
	f.push(fifoSlot{k: k, seq: f.seq, at: at})
	for len(f.m) > f.capacity {
		f.RemoveOldest()
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
	f.ring[f.head] = fifoSlot{} // no key kept alive
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
	at, ok := f.m[k]
	if !ok {
		return
	}
	f.drop(k, at)
	f.stale++
	f.onEvict(k)
}

// GetOldest returns the oldest record.
func (f *recordFIFO) GetOldest() (completedKey, completedRecord, bool) {
	for f.n > 0 {
		s := f.ring[f.head]
		if f.live(s) {
			return s.k, f.vals[s.at].r, true
		}
		f.popFront() // stale: its record left out of order
		f.stale--
	}
	return completedKey{}, completedRecord{}, false
}

// RemoveOldest removes the oldest record, if any.
func (f *recordFIFO) RemoveOldest() {
	k, _, ok := f.GetOldest()
	if !ok {
		return
	}
	at := f.ring[f.head].at
	f.popFront()
	f.drop(k, at)
	f.onEvict(k)
}
