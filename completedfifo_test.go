package imv2

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/xagentkit/imv2/fakeclock"
	"pgregory.net/rapid"
)

// pointerIn returns the path to the first pointer a value of type t
// holds (a pointer, string, slice, map, channel, func or interface), or
// "" if it holds none.
func pointerIn(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if p := pointerIn(t.Field(i).Type); p != "" {
				return "." + t.Field(i).Name + p
			}
		}
		return ""
	case reflect.Array:
		if t.Len() == 0 {
			return ""
		}
		if p := pointerIn(t.Elem()); p != "" {
			return "[]" + p
		}
		return ""
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	default:
		return " (" + t.String() + ")"
	}
}

// TestRecordFIFO_S6_TablesHoldNoPointer: the per-record memory of a
// recordFIFO (records, key bytes, key index, ring) holds no pointer, so
// the GC allocates it noscan and never marks through it: at
// DefaultCompletedCap it is most of a busy process's live heap.
func TestRecordFIFO_S6_TablesHoldNoPointer(t *testing.T) {
	// The walk finds the pointers of the layout before this one.
	for _, held := range []reflect.Type{reflect.TypeFor[completedKey](), reflect.TypeFor[time.Time](), reflect.TypeFor[[1]map[int]int]()} {
		if pointerIn(held) == "" {
			t.Fatalf("pointerIn finds no pointer in %v", held)
		}
	}
	f := reflect.TypeFor[recordFIFO]()
	for _, name := range []string{"vals", "table", "ring", "keys"} {
		field, ok := f.FieldByName(name)
		if !ok {
			t.Errorf("recordFIFO has no field %s", name)
			continue
		}
		if field.Type.Kind() != reflect.Slice {
			t.Errorf("recordFIFO.%s is a %v, want a slice", name, field.Type)
			continue
		}
		if p := pointerIn(field.Type.Elem()); p != "" {
			t.Errorf("recordFIFO.%s holds a pointer: %v%s", name, field.Type.Elem(), p)
		}
	}
	if p := pointerIn(reflect.TypeFor[completedRecord]().Field(0).Type); p != "" {
		t.Errorf("a Fingerprint holds a pointer: %s", p)
	}
}

// TestRecordFIFO_S6_LikeAnOrderedListOfCapacity: under any sequence of
// adds (new keys and re-records), removals, removals of the oldest and of
// the expired,
// recordFIFO holds what a plain ordered list of at most capacity keys
// holds, in the same order and by channel, tells every key that leaves
// exactly once, and its buffer and table stay within four times the
// capacity (at least 16) and its key bytes within four times the most
// they held. Keys are empty, short, 40 and 300 bytes long, so that their
// bytes wrap around the end of the buffer and get laid out anew.
func TestRecordFIFO_S6_LikeAnOrderedListOfCapacity(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 40).Draw(rt, "capacity")
		var evicted []completedKey
		f := newRecordFIFO(capacity, func(k completedKey) { evicted = append(evicted, k) })
		var model []completedKey // oldest first
		vals := map[completedKey]completedRecord{}
		key := func(rt *rapid.T) completedKey {
			ch := testChannels[rapid.IntRange(0, len(testChannels)-1).Draw(rt, "ch")]
			return completedKey{ch, testMessageID(rapid.IntRange(0, 60).Draw(rt, "msg"))}
		}
		span := func(k completedKey) int { return max(len(k.channel)+len(k.message), 1) }
		spans := func() (n int) {
			for _, k := range model {
				n += span(k)
			}
			return n
		}
		mostKeyBytes := 0
		gone := func(k completedKey) {
			model = slices.DeleteFunc(model, func(x completedKey) bool { return x == k })
			delete(vals, k)
		}
		for i := range rapid.IntRange(1, 400).Draw(rt, "steps") {
			evicted = evicted[:0]
			var wantEvicted []completedKey
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1: // remove a key, held or not
				k := key(rt)
				if _, ok := vals[k]; ok {
					wantEvicted = append(wantEvicted, k)
					gone(k)
				}
				f.Remove(k)
			case 2: // remove the oldest
				if len(model) > 0 {
					wantEvicted = append(wantEvicted, model[0])
					gone(model[0])
				}
				f.RemoveOldest()
			case 3: // remove the expired: expiry grows with the step, so they are the oldest
				now := time.Unix(int64(rapid.IntRange(0, 400).Draw(rt, "now")), 0)
				for len(model) > 0 && !now.Before(vals[model[0]].expires) {
					wantEvicted = append(wantEvicted, model[0])
					gone(model[0])
				}
				f.RemoveExpired(now)
			default: // add, a re-record moves the key to the back
				k := key(rt)
				r := completedRecord{fp: Fingerprint{byte(i)}, expires: time.Unix(int64(i), 0)}
				if _, ok := vals[k]; ok {
					wantEvicted = append(wantEvicted, k)
					gone(k)
				}
				mostKeyBytes = max(mostKeyBytes, spans()+span(k))
				model = append(model, k)
				vals[k] = r
				for len(model) > capacity {
					wantEvicted = append(wantEvicted, model[0])
					gone(model[0])
				}
				f.Add(k, r)
			}
			if !slices.Equal(evicted, wantEvicted) {
				rt.Fatalf("step %d: evicted %v, want %v", i, evicted, wantEvicted)
			}
			if f.Len() != len(model) {
				rt.Fatalf("step %d: Len %d, want %d", i, f.Len(), len(model))
			}
			for k, v := range vals {
				if got, ok := f.Peek(k); !ok || got != v {
					rt.Fatalf("step %d: Peek(%v) = %v %v, want %v", i, k, got, ok, v)
				}
			}
			if k, _, ok := f.GetOldest(); ok != (len(model) > 0) || ok && k != model[0] {
				rt.Fatalf("step %d: oldest %v %v, want %v", i, k, ok, model)
			}
			if n := len(f.ring); n > max(16, 4*capacity) {
				rt.Fatalf("step %d: a buffer of %d slots for a capacity of %d", i, n, capacity)
			}
			if n, v := len(f.table), len(f.vals); n > max(16, 4*(capacity+1)) || v > capacity+1 {
				rt.Fatalf("step %d: a table of %d and %d records for a capacity of %d", i, n, v, capacity)
			}
			if n := len(f.keys); n > max(64, 4*mostKeyBytes) || f.keyLive != spans() {
				rt.Fatalf("step %d: key bytes %d for %d held (%d counted), at most %d", i, n, spans(), f.keyLive, mostKeyBytes)
			}
			if err := keyLayoutError(f); err != "" {
				rt.Fatalf("step %d: %s", i, err)
			}
			for _, c := range testChannels {
				var want []string
				for _, k := range model {
					if k.channel == c {
						want = append(want, k.message)
					}
				}
				got := f.Of(c)
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					rt.Fatalf("step %d: Of(%s) = %v, want %v", i, c, got, want)
				}
			}
		}
		// The order, oldest first, by draining.
		var order []completedKey
		for f.Len() > 0 {
			k, _, _ := f.GetOldest()
			order = append(order, k)
			f.RemoveOldest()
		}
		if !slices.Equal(order, model) {
			rt.Fatalf("order %v, want %v", order, model)
		}
	})
}

// TestCompletedStore_S6_AnyClockKeepsItsRecords: a record lives its TTL
// whatever the clock reads, the zero time and years past 2262 (Unix
// nanoseconds' range) included: expiries are kept relative to the
// store's first time, not in Unix nanoseconds.
func TestCompletedStore_S6_AnyClockKeepsItsRecords(t *testing.T) {
	for _, at := range []time.Time{{}, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		clk := fakeclock.New(at)
		s := NewMemoryCompletedStore(10, time.Hour, clk)
		ctx := context.Background()
		for _, id := range []string{"m1", "m2"} {
			if err := s.Record(ctx, "cch_1", id, Fingerprint{1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok, _ := s.Lookup(ctx, "cch_1", "m1"); !ok {
			t.Errorf("clock at %v: m1, recorded a moment ago, is gone after the next Record", at)
		}
		clk.Advance(2 * time.Hour)
		if err := s.Record(ctx, "cch_1", "m3", Fingerprint{1}); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.Lookup(ctx, "cch_1", "m1"); ok {
			t.Errorf("clock at %v: m1 outlived its TTL", at)
		}
		if got := s.(*memoryCompletedStore).Len(); got != 1 {
			t.Errorf("clock at %v: %d records after the sweep, want 1", at, got)
		}
	}
}

// keyLayoutError returns what is wrong with the layout of f's key bytes:
// the bounds out of order, or a record's key outside the bytes held or
// overlapping another's.
func keyLayoutError(f *recordFIFO) string {
	h, t, w := f.keyHead, f.keyTail, f.keyWrap
	if w == 0 && !(0 <= h && h <= t && t <= len(f.keys)) || w > 0 && !(0 <= t && t <= h && h <= w && w <= len(f.keys)) {
		return fmt.Sprintf("head %d, tail %d, wrap %d in %d bytes", h, t, w, len(f.keys))
	}
	type span struct{ off, end int }
	var spans []span
	for i := range f.vals {
		if v := &f.vals[i]; v.seq != 0 {
			spans = append(spans, span{v.off, v.off + v.span()})
		}
	}
	for _, s := range spans {
		if in := w == 0 && h <= s.off && s.end <= t || w > 0 && (h <= s.off && s.end <= w || s.end <= t); !in {
			return fmt.Sprintf("key at [%d, %d) outside head %d, tail %d, wrap %d", s.off, s.end, h, t, w)
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.off - b.off })
	for i := 1; i < len(spans); i++ {
		if spans[i].off < spans[i-1].end {
			return fmt.Sprintf("keys at %v and %v overlap", spans[i-1], spans[i])
		}
	}
	return ""
}

// testChannels are the channel IDs of the property test: an empty one,
// short ones and a long one.
var testChannels = []string{"", "cch_1", "cch_2", "cch_" + strings.Repeat("l", 96)}

// testMessageID returns the i-th message ID of the property test: empty
// for 0, 300 bytes for one in 13, 40 bytes for one in 3, else short.
func testMessageID(i int) string {
	id := "m" + strconv.Itoa(i)
	switch {
	case i == 0:
		return ""
	case i%13 == 0:
		return id + strings.Repeat("x", 300-len(id))
	case i%3 == 0:
		return id + strings.Repeat("x", 40-len(id))
	}
	return id
}

// TestRecordFIFO_S6_ReRecordsDoNotGrowTheRing: a key recorded again and
// again (each time its old slot goes stale) and keys removed out of order
// keep the buffer at its smallest.
func TestRecordFIFO_S6_ReRecordsDoNotGrowTheRing(t *testing.T) {
	f := newRecordFIFO(DefaultCompletedCap, func(completedKey) {})
	k := completedKey{"cch_1", "m1"}
	for i := range 10_000 {
		f.Add(k, completedRecord{fp: Fingerprint{byte(i)}})
		f.Add(completedKey{"cch_1", "x" + strconv.Itoa(i)}, completedRecord{})
		f.Remove(completedKey{"cch_1", "x" + strconv.Itoa(i)})
	}
	if n := len(f.ring); f.Len() != 1 || n > 16 {
		t.Fatalf("a buffer of %d slots for %d records", n, f.Len())
	}
}

// TestRecordFIFO_S6_FloodKeepsItsSize: a FIFO at its capacity that keeps
// recording new keys on a few channels reuses its table, records, ring
// and key bytes: what it holds after 100 times its capacity is the size
// it reached at its capacity (a Go map churned so keeps growing,
// mapcompact.go), and its keys are never laid out anew.
func TestRecordFIFO_S6_FloodKeepsItsSize(t *testing.T) {
	const capacity = 1000
	f := newRecordFIFO(capacity, nil)
	add := func(i int) {
		f.Add(completedKey{"cch_" + strconv.Itoa(i%3), "m" + strconv.Itoa(i)}, completedRecord{})
	}
	for i := range 2 * capacity {
		add(i)
	}
	table, vals, ring, keys := cap(f.table), cap(f.vals), cap(f.ring), &f.keys[0]
	for i := 2 * capacity; i < 100*capacity; i++ {
		add(i)
	}
	if cap(f.table) != table || cap(f.vals) != vals || cap(f.ring) != ring || f.Len() != capacity {
		t.Fatalf("table %d → %d, records %d → %d, ring %d → %d, %d held", table, cap(f.table), vals, cap(f.vals), ring, cap(f.ring), f.Len())
	}
	if &f.keys[0] != keys { // the oldest leave first: their bytes take the newest
		t.Fatalf("key bytes laid out anew (%d of them)", len(f.keys))
	}
}

// BenchmarkMemoryCompletedStore_ScanHeap fills a store with 100,000
// records (100 channels, SDK message IDs) and reports, per record, the
// heap it adds that every GC cycle must scan (/gc/scan/heap:bytes) and
// the live heap it adds, and how long a forced GC takes with it held.
func BenchmarkMemoryCompletedStore_ScanHeap(b *testing.B) {
	const records = 100_000
	ctx := context.Background()
	read := func() (scan, live uint64) {
		m := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}, {Name: "/gc/heap/live:bytes"}}
		metrics.Read(m)
		return m[0].Value.Uint64(), m[1].Value.Uint64()
	}
	var scan, live, gc float64
	for range b.N {
		runtime.GC()
		scan0, live0 := read()
		s := newMemoryCompletedStore(records, time.Hour, nil)
		for i := range records {
			ch := "cch_00000000-0000-4000-8000-0000000000" + strconv.Itoa(10+i%100)
			_ = s.Record(ctx, ch, NewMessageID(), Fingerprint{byte(i)})
		}
		runtime.GC()
		start := time.Now()
		runtime.GC()
		gc += float64(time.Since(start).Microseconds())
		scan1, live1 := read()
		scan += (float64(scan1) - float64(scan0)) / records
		live += (float64(live1) - float64(live0)) / records
		runtime.KeepAlive(s)
	}
	b.ReportMetric(scan/float64(b.N), "scan-B/record")
	b.ReportMetric(live/float64(b.N), "live-B/record")
	b.ReportMetric(gc/float64(b.N), "µs/GC")
}

// BenchmarkMemoryCompletedStore_DeliverWithGarbage: what a delivered
// message costs a full store (100,000 records, SDK IDs) when, as on the
// real path, each message also leaves garbage (32 allocations of 96 B),
// so GC cycles come often and mark whatever the store holds.
func BenchmarkMemoryCompletedStore_DeliverWithGarbage(b *testing.B) {
	ctx := context.Background()
	s := newMemoryCompletedStore(100_000, time.Hour, nil)
	channel := func(i int) string { return "cch_00000000-0000-4000-8000-0000000000" + strconv.Itoa(10+i%100) }
	for i := range 100_000 {
		_ = s.Record(ctx, channel(i), NewMessageID(), Fingerprint{byte(i)})
	}
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = NewMessageID()
	}
	garbage := make([][]byte, 32)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ch, id := channel(i), ids[i&(len(ids)-1)]+strconv.Itoa(i>>16)
		if _, err := s.Claim(ctx, ch, id, Fingerprint{1}, "owner", time.Minute); err != nil {
			b.Fatal(err)
		}
		if err := s.Record(ctx, ch, id, Fingerprint{1}); err != nil {
			b.Fatal(err)
		}
		for j := range garbage {
			garbage[j] = make([]byte, 96)
		}
	}
	runtime.KeepAlive(garbage)
}

// TestRecordFIFO_S6_KeepsNoCallerString: the FIFO holds no string its
// caller passed (one may share a decoded packet's buffer, kept for the
// records' TTL): neither as a record's key nor as the channel index's
// key, also after more records of the channel and removals.
func TestRecordFIFO_S6_KeepsNoCallerString(t *testing.T) {
	f := newRecordFIFO(10, nil)
	var given []*byte
	give := func(s string) string {
		c := strings.Clone(s)
		given = append(given, unsafe.StringData(c))
		return c
	}
	for i := range 4 {
		f.Add(completedKey{give("cch_1"), give("m" + strconv.Itoa(i))}, completedRecord{})
	}
	f.Remove(completedKey{give("cch_1"), give("m3")}) // the channel's newest: its index moves
	f.Remove(completedKey{give("cch_1"), give("m0")})
	for ch := range f.chans {
		if slices.Contains(given, unsafe.StringData(ch)) {
			t.Fatalf("the channel index holds the caller's string %q", ch)
		}
	}
	if got := f.Of("cch_1"); !slices.Equal(got, []string{"m2", "m1"}) {
		t.Fatalf("Of = %v, want [m2 m1]", got)
	}
}
