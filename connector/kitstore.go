package connector

import (
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// memoryStore is the default Store: the SDK's in-memory stores with their
// documented caps, one of each for every channel of the Connector. The
// completed store is a ClaimStore, so the Channel claims before it posts.
type memoryStore struct {
	imv2.PendingStore
	imv2.ClaimStore
	state.ChannelRegistry
	*state.MemoryBindingStore
}

func newMemoryStore(clk clock.Clock) *memoryStore {
	return &memoryStore{
		imv2.NewMemoryPendingStore(0),
		imv2.NewMemoryCompletedStore(0, 0, clk),
		state.NewMemoryRegistry(0),
		state.NewMemoryBindingStore(0),
	}
}
