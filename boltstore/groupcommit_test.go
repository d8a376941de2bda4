package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
)

// holdCommit starts a write call that stays inside its transaction until
// release is closed, so the calls that follow queue behind it.
func holdCommit(t *testing.T, s *Store) (release func(), done <-chan error) {
	t.Helper()
	inside, hold, out := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		out <- s.update(context.Background(), func(tx *bolt.Tx) error {
			close(inside)
			<-hold
			return tx.Bucket(bucketMeta).Put([]byte("test_hold"), []byte{1})
		})
	}()
	<-inside
	return func() { close(hold) }, out
}

// waitQueued waits until n calls wait behind the commit under way.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	bound := time.Now().Add(10 * time.Second) // a guard against a hang, not a measured time
	for {
		s.group.mu.Lock()
		q := len(s.group.queue)
		s.group.mu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(bound) {
			t.Fatalf("%d calls queued behind the commit under way, want %d: they do not share a commit", q, n)
		}
		runtime.Gosched()
	}
}

// TestGroupCommit_S8_ConcurrentRecordsShareOneCommit: Records of many
// channels that arrive during a commit go together in the next one, each
// returning after it, and each is in the file after a reopen. A group is
// at most maxGroup calls.
func TestGroupCommit_S8_ConcurrentRecordsShareOneCommit(t *testing.T) {
	for _, n := range []int{100, maxGroup + 10} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "g.db")
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			release, held := holdCommit(t, s)
			fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = s.Record(ctx, "ch-"+strconv.Itoa(i), "m", fp)
				}()
			}
			waitQueued(t, s, n)
			before := s.group.commits.Load()
			release()
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Record %d: %v", i, err)
				}
			}
			want := int64(1 + (n+maxGroup-1)/maxGroup) // the held commit, then ceil(n/maxGroup)
			if got := s.group.commits.Load() - before; got != want {
				t.Fatalf("%d concurrent Records took %d commits after the held one, want %d", n, got-1, want-1)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range n {
				if _, ok, err := s.Lookup(ctx, "ch-"+strconv.Itoa(i), "m"); err != nil || !ok {
					t.Fatalf("after reopen, record %d: found=%v err=%v", i, ok, err)
				}
			}
			st, err := s.Stats(ctx)
			if err != nil || st.Completed != n {
				t.Fatalf("Stats = %+v, %v; want %d completed", st, err, n)
			}
		})
	}
}

// TestGroupCommit_OneFailureLeavesTheOthers: a call that fails inside a
// group leaves nothing behind; the group's other calls commit, and each
// returns its own outcome.
func TestGroupCommit_OneFailureLeavesTheOthers(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "g.db"), Options{PendingCap: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release, held := holdCommit(t, s)
	boom := errors.New("boom")
	entry := func(id string) imv2.PendingEntry {
		return imv2.PendingEntry{ChannelID: "ch", Created: time.Unix(1, 0), Message: imv2.ChatMessage{MessageID: id, Text: "x"}}
	}
	var wg sync.WaitGroup
	var failErr, fullErr error
	addErrs := make([]error, 3)
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() { addErrs[0] = s.Add(ctx, entry("a")) })
	waitQueued(t, s, 1)
	run(func() {
		failErr = s.update(ctx, func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketMeta).Put([]byte("test_partial"), []byte{1}); err != nil {
				return err
			}
			return boom // after a write: it must not stay
		})
	})
	waitQueued(t, s, 2)
	run(func() { fullErr = s.Add(ctx, entry("b")) }) // the cap is 1: "a" holds it
	waitQueued(t, s, 3)
	run(func() {
		addErrs[1] = s.Add(ctx, imv2.PendingEntry{ChannelID: "other", Created: time.Unix(1, 0), Message: imv2.ChatMessage{MessageID: "c", Text: "x"}})
	})
	waitQueued(t, s, 4)
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !errors.Is(failErr, boom) {
		t.Fatalf("the failing call returned %v, want boom", failErr)
	}
	if !errors.Is(fullErr, &imv2.Error{Code: imv2.CodePendingFull}) {
		t.Fatalf("Add beyond the cap returned %v, want pending_full", fullErr)
	}
	if addErrs[0] != nil || addErrs[1] != nil {
		t.Fatalf("the other Adds returned %v", addErrs)
	}
	if err := s.view(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get([]byte("test_partial")) != nil {
			return errors.New("the failed call's write was committed")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for ch, want := range map[string]int{"ch": 1, "other": 1} {
		l, err := s.List(ctx, ch)
		if err != nil || len(l) != want {
			t.Fatalf("List(%s) = %d entries, %v; want %d", ch, len(l), err, want)
		}
	}
}

// TestGroupCommit_APanicFailsItsGroupOnly: a function that panics inside
// a group panics on its caller's stack, as db.Update's would; the other
// calls of its group fail with nothing written, and later calls commit.
func TestGroupCommit_APanicFailsItsGroupOnly(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "g.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"})
	release, held := holdCommit(t, s)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = s.update(ctx, func(*bolt.Tx) error { panic("boom") })
	}()
	waitQueued(t, s, 1)
	other := make(chan error, 1)
	go func() { other <- s.Record(ctx, "ch", "m1", fp) }()
	waitQueued(t, s, 2)
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if p := <-panicked; p != "boom" {
		t.Fatalf("the panicking call recovered %v, want boom", p)
	}
	if err := <-other; !errors.Is(err, errGroupPanic) {
		t.Fatalf("the other call of the group returned %v, want errGroupPanic", err)
	}
	if _, ok, _ := s.Lookup(ctx, "ch", "m1"); ok {
		t.Fatal("the record of the abandoned group was written")
	}
	done := make(chan error, 1)
	go func() { done <- s.Record(ctx, "ch", "m2", fp) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a guard against a hang
		t.Fatal("a Record after the panic never returned: the group lost its leader or the writer lock")
	}
}
