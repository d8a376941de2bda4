package imv2_test

import (
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

// The in-memory stores are the reference the storetest contract describes;
// they are not durable, so they run without a reopener.

func TestMemoryPendingStore_S1_Contract(t *testing.T) {
	storetest.TestPendingStore(t, func(t *testing.T, capacity int) imv2.PendingStore {
		return imv2.NewMemoryPendingStore(capacity)
	}, nil)
}

func TestMemoryCompletedStore_S6_Contract(t *testing.T) {
	storetest.TestCompletedStore(t, func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
		return imv2.NewMemoryCompletedStore(capacity, ttl, clock)
	}, nil)
}

func TestMemoryStores_S9_Independent(t *testing.T) {
	storetest.TestIndependent(t, func(t *testing.T) (imv2.PendingStore, imv2.CompletedStore) {
		return imv2.NewMemoryPendingStore(0), imv2.NewMemoryCompletedStore(0, 0, nil)
	})
}

func TestMemoryCompletedStore_S8_ClaimContract(t *testing.T) {
	storetest.TestClaimStore(t, func(t *testing.T, ttl time.Duration, clock clock.Clock) imv2.ClaimStore {
		return imv2.NewMemoryCompletedStore(0, ttl, clock)
	}, nil)
}

func TestMemoryCompletedStore_W13_ResultContract(t *testing.T) {
	storetest.TestResultStore(t, func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) state.ResultStore {
		return imv2.NewMemoryCompletedStore(capacity, ttl, clock).(state.ResultStore)
	}, nil)
}
