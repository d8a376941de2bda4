package pgstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
)

// xPending holds the pending store of each xAgent Client a test dials
// (*dataplane.Client → imv2.PendingStore): the Client hands out no
// engine Channel, so a test reads the finals not yet terminal from the
// store it gave the Client's Options.
var xPending sync.Map

// newXPending returns a pending store for an xAgent Client's Options;
// trackPending ties it to the Client once dialled.
func newXPending() imv2.PendingStore { return imv2.NewMemoryPendingStore(0) }

func trackPending(t *testing.T, x *dataplane.Client, st imv2.PendingStore) {
	xPending.Store(x, st)
	t.Cleanup(func() { xPending.Delete(x) })
}

// pendingOf returns the finals of channel ch that x holds pending.
func pendingOf(ctx context.Context, x *dataplane.Client, ch string) ([]imv2.PendingEntry, error) {
	st, ok := xPending.Load(x)
	if !ok {
		panic("pendingOf: a Client dialled without trackPending")
	}
	return st.(imv2.PendingStore).List(ctx, ch)
}
