package storetest_test

import (
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/storetest"
)

// A store's own test file runs the suite; the memory stores of package
// imv2 do exactly this in stores_test.go. A durable store passes a
// reopener instead of nil (see boltstore's tests).
func Example() {
	_ = func(t *testing.T) {
		storetest.TestPendingStore(t, func(t *testing.T, capacity int) imv2.PendingStore {
			return imv2.NewMemoryPendingStore(capacity)
		}, nil)
		storetest.TestCompletedStore(t, func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return imv2.NewMemoryCompletedStore(capacity, ttl, clock)
		}, nil)
	}
}
