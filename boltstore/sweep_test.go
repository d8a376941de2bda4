package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/pendingcodec"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func openTest(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "imv2.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func record(t *testing.T, s *Store, ch, id string) {
	t.Helper()
	if err := s.Record(context.Background(), ch, id, imv2.Fingerprint{1}); err != nil {
		t.Fatal(err)
	}
}

func stats(t *testing.T, s *Store) Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// S8: Record's ack leaves right after it returns; a store that skipped
// fsync could lose the record in a power cut. Guard the one switch.
func TestStore_S8_CommitsWithFsync(t *testing.T) {
	s := openTest(t, Options{})
	if s.db.NoSync {
		t.Fatal("bbolt NoSync is set: commits would not be fsynced")
	}
}

func TestSweep_S4_RemovesExpiredOnly(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(t0)
	s := openTest(t, Options{Clock: clock, CompletedTTL: time.Hour})
	s.sweepBatch = 3 // several transactions
	if err := s.Add(ctx, imv2.PendingEntry{ChannelID: "a", Message: imv2.ChatMessage{MessageID: "old", Text: "x"}, Created: t0}); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		record(t, s, "a", fmt.Sprint("old", i))
	}
	clock.Advance(30 * time.Minute)
	for i := range 3 {
		record(t, s, "b", fmt.Sprint("new", i))
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep before expiry = %d, %v; want 0", n, err)
	}
	clock.Advance(30 * time.Minute) // the "old" records are one TTL old
	n, err := s.Sweep(ctx)
	if err != nil || n != 7 {
		t.Fatalf("Sweep = %d, %v; want 7", n, err)
	}
	if st := stats(t, s); st.Completed != 3 || st.Pending != 1 {
		t.Fatalf("Stats after Sweep = %+v; want 3 completed and the 1 pending entry untouched", st)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want 0", n, err)
	}
	if _, ok, _ := s.Lookup(ctx, "b", "new0"); !ok {
		t.Fatal("unexpired record swept")
	}
	// The index and the records agree: every remaining index entry
	// points to a record and back.
	checkConsistent(t, s)
}

func TestRecord_S4_TrimsAFewExpired(t *testing.T) {
	clock := fakeclock.New(t0)
	s := openTest(t, Options{Clock: clock, CompletedTTL: time.Hour})
	for i := range inlineSweep + 4 {
		record(t, s, "a", fmt.Sprint(i))
	}
	clock.Advance(time.Hour)
	record(t, s, "a", "trigger")
	if got, want := stats(t, s).Completed, 4+1; got != want {
		t.Fatalf("after one Record %d records remain, want %d (%d trimmed)", got, want, inlineSweep)
	}
	record(t, s, "a", "trigger2")
	if got := stats(t, s).Completed; got != 2 {
		t.Fatalf("after two Records %d records remain, want 2", got)
	}
	checkConsistent(t, s)
}

func TestSweeper_RunsOnClockAndStopsOnClose(t *testing.T) {
	clock := fakeclock.New(t0)
	var mu sync.Mutex
	var sweeps, removed int
	s, err := Open(filepath.Join(t.TempDir(), "imv2.db"), Options{
		Clock: clock, CompletedTTL: time.Hour, SweepInterval: 10 * time.Minute,
		OnSweep: func(n int, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("background sweep: %v", err)
			}
			sweeps++
			removed += n
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	record(t, s, "a", "m")
	clock.Advance(59 * time.Minute)
	mu.Lock()
	if sweeps != 5 || removed != 0 {
		t.Fatalf("after 59m: %d sweeps removed %d; want 5 removing 0", sweeps, removed)
	}
	mu.Unlock()
	clock.Advance(time.Minute)
	mu.Lock()
	if sweeps != 6 || removed != 1 {
		t.Fatalf("after 60m: %d sweeps removed %d; want 6 removing 1", sweeps, removed)
	}
	mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers left after Close", n)
	}
	clock.Advance(time.Hour)
	mu.Lock()
	defer mu.Unlock()
	if sweeps != 6 {
		t.Fatalf("%d sweeps, want none after Close", sweeps)
	}
}

// With the system clock the sweeper is a real goroutine; TestMain's goleak
// check fails the package if Close leaves it behind.
func TestSweeper_SystemClock(t *testing.T) {
	swept := make(chan int, 1)
	s, err := Open(filepath.Join(t.TempDir(), "imv2.db"), Options{
		CompletedTTL:  time.Nanosecond, // everything is expired at once
		SweepInterval: time.Millisecond,
		OnSweep: func(n int, err error) {
			if n > 0 || err != nil {
				select {
				case swept <- n:
				default:
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	record(t, s, "a", "m")
	select {
	case n := <-swept:
		if n != 1 {
			t.Fatalf("sweeper removed %d, want 1", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sweeper never swept")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestList_CorruptValueIsAnError(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	if err := s.Add(ctx, imv2.PendingEntry{ChannelID: "a", Message: imv2.ChatMessage{MessageID: "m", Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		k, v := c.First()
		return tx.Bucket(bucketPending).Put(append([]byte(nil), k...), v[:len(v)-1])
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "a"); !errors.Is(err, pendingcodec.ErrCorrupt) {
		t.Fatalf("List of a truncated value: %v, want ErrCorrupt", err)
	}
}

// checkConsistent verifies the completed bucket, its order indexes and
// the counters agree.
func checkConsistent(t *testing.T, s *Store) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		recs, order := tx.Bucket(bucketCompleted), tx.Bucket(bucketCompletedOrder)
		n := 0
		err := order.ForEach(func(k, v []byte) error {
			n++
			rec := recs.Get(v)
			if len(rec) != completedValueLen || string(rec[:16]) != string(k) {
				return fmt.Errorf("index entry %x → %q has no matching record", k, v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if recs.Stats().KeyN != n {
			return fmt.Errorf("%d records, %d index entries", recs.Stats().KeyN, n)
		}
		if c := getU64(tx.Bucket(bucketMeta), keyCompletedCount); c != uint64(n) {
			return fmt.Errorf("completed_count %d, %d records", c, n)
		}
		counts := map[string]uint64{}
		err = tx.Bucket(bucketCompletedByChannel).ForEach(func(k, id []byte) error {
			ch := channelOf(k)
			counts[string(ch)]++
			if rec := recs.Get(append(append(bytes.Clone(ch), 0), id...)); len(rec) != completedValueLen || string(rec[:16]) != string(k[len(ch)+1:]) {
				return fmt.Errorf("channel index entry %q has no matching record", k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if m := tx.Bucket(bucketCompletedByChannel).Stats().KeyN; m != n {
			return fmt.Errorf("%d records, %d channel index entries", n, m)
		}
		if c := getU64(tx.Bucket(bucketMeta), keyCompletedChannels); c != uint64(len(counts)) {
			return fmt.Errorf("completed_channels %d, %d channels", c, len(counts))
		}
		type group struct{ records, channels uint64 }
		groups := map[string]group{}
		err = tx.Bucket(bucketCompletedChannels).ForEach(func(ch, v []byte) error {
			if len(v) < 8 || beUint64(v[:8]) != counts[string(ch)] {
				return fmt.Errorf("channel %q counted %x, holds %d", ch, v, counts[string(ch)])
			}
			g := groups[string(v[8:])]
			g.records += beUint64(v[:8])
			g.channels++
			groups[string(v[8:])] = g
			return nil
		})
		if err != nil {
			return err
		}
		if c := getU64(tx.Bucket(bucketMeta), keyCompletedGroups); c != uint64(len(groups)) {
			return fmt.Errorf("completed_groups %d, %d groups", c, len(groups))
		}
		if m := tx.Bucket(bucketCompletedGroups).Stats().KeyN; m != len(groups) {
			return fmt.Errorf("%d groups counted, %d hold channels", m, len(groups))
		}
		for id, g := range groups {
			v := tx.Bucket(bucketCompletedGroups).Get(groupKey([]byte(id)))
			if len(v) != 16 || beUint64(v[:8]) != g.records || beUint64(v[8:]) != g.channels {
				return fmt.Errorf("group %q counted %x, holds %d records of %d channels", id, v, g.records, g.channels)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
