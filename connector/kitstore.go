package connector

import (
	"context"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// memoryStore is the default Store: the SDK's in-memory stores with their
// documented caps, one of each for every channel of the Connector. The
// completed store is a ClaimStarter, so the Channel claims before it posts
// and records that a post began,
// and a ResultStore, so the data plane keeps a tool call's result for its
// replay (W13).
type memoryStore struct {
	imv2.PendingStore
	claimResultStore
	state.ChannelRegistry
	*state.MemoryBindingStore
}

// claimResultStore is what imv2.NewMemoryCompletedStore returns.
type claimResultStore interface {
	imv2.ClaimStarter
	RecordResult(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, result []byte) error
	LookupResult(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, []byte, bool, error)
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
		imv2.NewMemoryCompletedStore(0, 0, clk).(claimResultStore),
		state.NewMemoryRegistry(0),
		state.NewMemoryBindingStore(0),
	}
}
