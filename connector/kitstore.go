package connector

import (
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// memoryStore is the default Store: the SDK's in-memory stores with their
// documented caps, one of each for every channel of the Connector. The
// completed store is a ClaimStarter, so the Channel claims before it
// posts and records that a post began.
type memoryStore struct {
	imv2.PendingStore
	imv2.ClaimStarter
	state.ChannelRegistry
	*state.MemoryBindingStore
}

// NewMemoryStore returns the in-memory Store New uses when Options.Store
// is nil (clk expires completed records; nil means clock.System{}).
// Passing it explicitly says memory state is intended, so New does not
// log its warning: a command that tells its operator itself (the console
// names its -store flag) warns once.
func NewMemoryStore(clk clock.Clock) state.Store { return newMemoryStore(clk) }

func newMemoryStore(clk clock.Clock) *memoryStore {
	if clk == nil {
		clk = clock.System{}
	}
	return &memoryStore{
		imv2.NewMemoryPendingStore(0),
		imv2.NewMemoryCompletedStore(0, 0, clk),
		state.NewMemoryRegistry(0),
		state.NewMemoryBindingStore(0),
	}
}
