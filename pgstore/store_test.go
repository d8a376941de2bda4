package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

var (
	_ imv2.PendingStore     = (*pgstore.Store)(nil)
	_ imv2.ClaimStore       = (*pgstore.Store)(nil)
	_ state.ChannelRegistry = (*pgstore.Store)(nil)
)

// opener opens stores on per-test databases and reopens them with the
// URL and options they were first opened with, as a restarted replica
// would.
type opener struct {
	mu    sync.Mutex
	opens map[*pgstore.Store]opened
}

type opened struct {
	url  string
	opts pgstore.Options
}

func newOpener() *opener { return &opener{opens: map[*pgstore.Store]opened{}} }

func (o *opener) open(t *testing.T, url string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s := openStore(t, url, opts)
	o.mu.Lock()
	o.opens[s] = opened{url, opts}
	o.mu.Unlock()
	return s
}

func (o *opener) reopen(t *testing.T, s *pgstore.Store) *pgstore.Store {
	t.Helper()
	o.mu.Lock()
	was := o.opens[s]
	o.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return o.open(t, was.url, was.opts)
}

// openStore opens a store on url, closed when t ends.
func openStore(t testing.TB, url string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // a second Close is harmless
	return s
}

func TestStore_S1_S8_PendingContract(t *testing.T) {
	o := newOpener()
	storetest.TestPendingStore(t, func(t *testing.T, capacity int) imv2.PendingStore {
		return o.open(t, srv.NewDatabase(t), pgstore.Options{PendingCap: capacity}).Pending()
	}, func(t *testing.T, s imv2.PendingStore) imv2.PendingStore {
		return o.reopen(t, s.(*pgstore.Store)).Pending()
	})
}

func TestStore_S6_S8_CompletedContract(t *testing.T) {
	o := newOpener()
	storetest.TestCompletedStore(t, func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
		opts := pgstore.Options{CompletedCap: capacity, CompletedTTL: ttl, Clock: clock}
		return o.open(t, srv.NewDatabase(t), opts).Completed()
	}, func(t *testing.T, s imv2.CompletedStore) imv2.CompletedStore {
		return o.reopen(t, s.(*pgstore.Store)).Completed()
	})
}

func TestStore_S9_OneDatabaseTwoFacts(t *testing.T) {
	storetest.TestIndependent(t, func(t *testing.T) (imv2.PendingStore, imv2.CompletedStore) {
		s := openStore(t, srv.NewDatabase(t), pgstore.Options{})
		return s.Pending(), s.Completed()
	})
}

// TestStore_W13_ResultContract runs the shared ResultStore suite, with a
// reopen: a new Store on the same database, as a restarted process.
func TestStore_W13_ResultContract(t *testing.T) {
	o := newOpener()
	storetest.TestResultStore(t, func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) state.ResultStore {
		return o.open(t, srv.NewDatabase(t), pgstore.Options{CompletedCap: capacity, CompletedTTL: ttl, Clock: clock})
	}, func(t *testing.T, s state.ResultStore) state.ResultStore {
		return o.reopen(t, s.(*pgstore.Store))
	})
}

// TestStore_S8_A6_ClaimContract runs the shared ClaimStore suite. There is
// no reopener: a store shared by replicas cannot call every earlier claim
// orphaned when one replica restarts; a restarted process has a new owner
// ID, and its old claims turn orphaned when their lease ends.
func TestStore_S8_A6_ClaimContract(t *testing.T) {
	o := newOpener()
	storetest.TestClaimStore(t, func(t *testing.T, ttl time.Duration, clock clock.Clock) imv2.ClaimStore {
		return o.open(t, srv.NewDatabase(t), pgstore.Options{CompletedTTL: ttl, Clock: clock}).Completed()
	}, nil)
}
