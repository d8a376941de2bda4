package boltstore_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

// opener opens stores in a test's temp dir and reopens them with the
// options they were first opened with, as a restarted process would.
type opener struct {
	mu   sync.Mutex
	opts map[*boltstore.Store]boltstore.Options
}

func newOpener() *opener { return &opener{opts: map[*boltstore.Store]boltstore.Options{}} }

func (o *opener) open(t *testing.T, path string, opts boltstore.Options) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	o.mu.Lock()
	o.opts[s] = opts
	o.mu.Unlock()
	return s
}

func (o *opener) reopen(t *testing.T, s *boltstore.Store) *boltstore.Store {
	t.Helper()
	o.mu.Lock()
	opts := o.opts[s]
	o.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return o.open(t, s.Path(), opts)
}

func tempPath(t *testing.T) string { return filepath.Join(t.TempDir(), "imv2.db") }

func TestStore_S1_S8_PendingContract(t *testing.T) {
	o := newOpener()
	storetest.TestPendingStore(t, func(t *testing.T, capacity int) imv2.PendingStore {
		return o.open(t, tempPath(t), boltstore.Options{PendingCap: capacity}).Pending()
	}, func(t *testing.T, s imv2.PendingStore) imv2.PendingStore {
		return o.reopen(t, s.(*boltstore.Store)).Pending()
	})
}

func TestStore_S6_S8_CompletedContract(t *testing.T) {
	o := newOpener()
	storetest.TestCompletedStore(t, func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
		opts := boltstore.Options{CompletedCap: capacity, CompletedTTL: ttl, Clock: clock}
		return o.open(t, tempPath(t), opts).Completed()
	}, func(t *testing.T, s imv2.CompletedStore) imv2.CompletedStore {
		return o.reopen(t, s.(*boltstore.Store)).Completed()
	})
}

func TestStore_S9_OneFileTwoFacts(t *testing.T) {
	o := newOpener()
	storetest.TestIndependent(t, func(t *testing.T) (imv2.PendingStore, imv2.CompletedStore) {
		s := o.open(t, tempPath(t), boltstore.Options{})
		return s.Pending(), s.Completed()
	})
}

// lockHolderEnv makes the test binary a helper process that holds a store
// open until its stdin closes.
const lockHolderEnv = "BOLTSTORE_HOLD_LOCK"

func TestMain(m *testing.M) {
	if path := os.Getenv(killChildEnv); path != "" {
		os.Exit(killChildMain(path)) // TestGroupCommit_S8_KillMidBatch's child
	}
	if path := os.Getenv(lockHolderEnv); path != "" {
		s, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
		_ = s.Close()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestOpen_LockedByAnotherProcess(t *testing.T) {
	path := tempPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper process: %q, %v", line, err)
	}

	_, err = openWithin(t, path, 50*time.Millisecond)
	wantLocked(t, err, path)

	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper process: %v", err)
	}
	s, err := openWithin(t, path, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("Open after the other process exited: %v", err)
	}
	_ = s.Close()
}

func TestOpen_LockedByAnotherStore(t *testing.T) {
	path := tempPath(t)
	first, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = openWithin(t, path, 0) // default LockTimeout, 1s
	wantLocked(t, err, path)
	if !strings.Contains(err.Error(), "waited 1s") {
		t.Errorf("error %q does not name the default timeout", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := openWithin(t, path, 0)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	_ = second.Close()
}

// openWithin opens path and fails the test if Open does not return in a
// generous bound: it must give up by itself after the lock timeout, not
// hang. No wall time is asserted beyond that.
func openWithin(t *testing.T, path string, lockTimeout time.Duration) (*boltstore.Store, error) {
	t.Helper()
	type result struct {
		s   *boltstore.Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := boltstore.Open(path, boltstore.Options{LockTimeout: lockTimeout})
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Open(%s) did not give up on a held lock", path)
		return nil, nil
	}
}

func wantLocked(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("Open of a locked file: %v, want ErrLocked", err)
	}
	want := "boltstore: database " + path + " is locked by another process"
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start with %q", err, want)
	}
}

func TestOpen_Layout(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		is      error  // errors.Is target, if any
		want    string // substring of the error
	}{
		{
			name:    "newer version",
			prepare: func(t *testing.T, path string) { writeMeta(t, path, 5) },
			is:      boltstore.ErrLayoutVersion,
			want:    "has layout version 5; this build reads up to 4",
		},
		{
			name:    "far newer version",
			prepare: func(t *testing.T, path string) { writeMeta(t, path, 1<<40) },
			is:      boltstore.ErrLayoutVersion,
			want:    "has layout version 1099511627776",
		},
		{
			name:    "version 0 has no migration",
			prepare: func(t *testing.T, path string) { writeMeta(t, path, 0) },
			want:    "no migration from layout 0",
		},
		{
			name: "another program's bbolt file",
			prepare: func(t *testing.T, path string) {
				withBolt(t, path, func(tx *bolt.Tx) error {
					_, err := tx.CreateBucket([]byte("users"))
					return err
				})
			},
			want: `is a bbolt database of something else (it has bucket "users")`,
		},
		{
			name: "missing bucket",
			prepare: func(t *testing.T, path string) {
				s, err := boltstore.Open(path, boltstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				_ = s.Close()
				withBolt(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("completed_order")) })
			},
			want: `lacks bucket "completed_order"`,
		},
		{
			name: "not a database",
			prepare: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte(strings.Repeat("not bolt ", 1000)), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: "boltstore: open ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tempPath(t)
			tt.prepare(t, path)
			for range 2 { // the second Open must see the same error, not a lock left behind
				s, err := boltstore.Open(path, boltstore.Options{LockTimeout: 50 * time.Millisecond})
				if err == nil {
					_ = s.Close()
					t.Fatal("Open succeeded")
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("error %v is not %v", err, tt.is)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %q does not contain %q", err, tt.want)
				}
			}
		})
	}
}

// writeMeta writes a file whose meta bucket claims layout version v.
func writeMeta(t *testing.T, path string, v uint64) {
	withBolt(t, path, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("layout_version"), binary.BigEndian.AppendUint64(nil, v))
	})
}

func withBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestStore_InvalidIDs(t *testing.T) {
	ctx := context.Background()
	s := newOpener().open(t, tempPath(t), boltstore.Options{})
	long := strings.Repeat("x", imv2.MaxIDBytes+1)
	cases := []struct{ name, ch, id string }{
		{"empty channel", "", "m"},
		{"channel with 0x00", "a\x00b", "m"},
		{"channel too long", long, "m"},
		{"empty message_id", "ch", ""},
		{"message_id too long", "ch", long},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := imv2.PendingEntry{ChannelID: c.ch, Message: imv2.ChatMessage{MessageID: c.id, Text: "x"}}
			errs := map[string]error{
				"Add":    s.Add(ctx, e),
				"Remove": s.Remove(ctx, c.ch, c.id),
				"Record": s.Record(ctx, c.ch, c.id, imv2.Fingerprint{}),
			}
			_, _, errs["Lookup"] = s.Lookup(ctx, c.ch, c.id)
			if c.id != "" && c.id != long { // channel-only operations
				_, errs["List"] = s.List(ctx, c.ch)
				errs["DropChannel"] = s.DropChannel(ctx, c.ch)
				errs["DropPending"] = s.DropPending(ctx, c.ch)
			}
			for op, err := range errs {
				if !errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}) {
					t.Errorf("%s: %v, want code invalid_packet", op, err)
				}
			}
		})
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Pending != 0 || st.Completed != 0 {
		t.Fatalf("Stats after invalid calls = %+v, %v; want nothing stored", st, err)
	}
}

func TestStore_ClosedAndCanceled(t *testing.T) {
	s, err := boltstore.Open(tempPath(t), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	calls := func(ctx context.Context) map[string]error {
		errs := map[string]error{
			"Add":         s.Add(ctx, imv2.PendingEntry{ChannelID: "ch", Message: imv2.ChatMessage{MessageID: "m", Text: "x"}}),
			"Remove":      s.Remove(ctx, "ch", "m"),
			"Record":      s.Record(ctx, "ch", "m", imv2.Fingerprint{}),
			"DropChannel": s.DropChannel(ctx, "ch"),
			"DropPending": s.DropPending(ctx, "ch"),
		}
		_, errs["List"] = s.List(ctx, "ch")
		_, _, errs["Lookup"] = s.Lookup(ctx, "ch", "m")
		_, errs["Sweep"] = s.Sweep(ctx)
		_, errs["Stats"] = s.Stats(ctx)
		return errs
	}
	for op, err := range calls(canceled) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: %v", op, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for op, err := range calls(context.Background()) {
		if !errors.Is(err, imv2.ErrClosed) {
			t.Errorf("%s after Close: %v, want code closed", op, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStore_S7_DropPending(t *testing.T) {
	ctx := context.Background()
	s := newOpener().open(t, tempPath(t), boltstore.Options{PendingCap: 2})
	for _, ch := range []string{"a", "ab"} {
		for _, id := range []string{"m1", "m2"} {
			if err := s.Add(ctx, imv2.PendingEntry{ChannelID: ch, Message: imv2.ChatMessage{MessageID: id, Text: ch}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Record(ctx, "a", "m1", imv2.Fingerprint{1}); err != nil {
		t.Fatal(err)
	}
	if err := s.DropPending(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.List(ctx, "a"); err != nil || len(l) != 0 {
		t.Fatalf("List(a) after DropPending = %d entries, %v", len(l), err)
	}
	if l, err := s.List(ctx, "ab"); err != nil || len(l) != 2 {
		t.Fatalf("List(ab) after DropPending(a) = %d entries, %v", len(l), err)
	}
	if _, ok, err := s.Lookup(ctx, "a", "m1"); err != nil || !ok {
		t.Fatalf("completed record gone after DropPending (S9): %v, %v", ok, err)
	}
	// The cap counts from zero again, and m1 is no longer a duplicate.
	for _, id := range []string{"m1", "m3"} {
		if err := s.Add(ctx, imv2.PendingEntry{ChannelID: "a", Message: imv2.ChatMessage{MessageID: id, Text: "new"}}); err != nil {
			t.Fatalf("Add(%s) after DropPending: %v", id, err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.Pending != 4 || st.Completed != 1 {
		t.Fatalf("Stats = %+v, %v; want 4 pending, 1 completed", st, err)
	}
}

func TestStore_S4_SmallerCapOnReopen(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	o := newOpener()
	path := tempPath(t)
	s := o.open(t, path, boltstore.Options{CompletedCap: 5, Clock: clock})
	for i := range 5 {
		if err := s.Record(ctx, "ch", fmt.Sprint(i), imv2.Fingerprint{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = o.open(t, path, boltstore.Options{CompletedCap: 2, Clock: clock})
	if err := s.Record(ctx, "ch", "new", imv2.Fingerprint{9}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Completed != 2 {
		t.Fatalf("Stats = %+v, %v; want the new cap of 2", st, err)
	}
	for id, want := range map[string]bool{"0": false, "3": false, "4": true, "new": true} {
		if _, ok, err := s.Lookup(ctx, "ch", id); err != nil || ok != want {
			t.Errorf("Lookup(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
}

func TestStore_W13_ResultContract(t *testing.T) {
	o := newOpener()
	storetest.TestResultStore(t, func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) state.ResultStore {
		return o.open(t, tempPath(t), boltstore.Options{CompletedCap: capacity, CompletedTTL: ttl, Clock: clock})
	}, func(t *testing.T, s state.ResultStore) state.ResultStore {
		return o.reopen(t, s.(*boltstore.Store))
	})
}

func TestStore_S8_ClaimContract(t *testing.T) {
	o := newOpener()
	storetest.TestClaimStore(t, func(t *testing.T, ttl time.Duration, clock clock.Clock) imv2.ClaimStore {
		return o.open(t, tempPath(t), boltstore.Options{CompletedTTL: ttl, Clock: clock})
	}, func(t *testing.T, s imv2.ClaimStore) imv2.ClaimStore {
		return o.reopen(t, s.(*boltstore.Store))
	})
}
