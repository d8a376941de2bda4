package connector

import (
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
)

// memoryStore is the default Store: the SDK's in-memory stores with their
// documented caps, one of each for every channel of the Connector.
type memoryStore struct {
	*imv2.MemoryPendingStore
	*imv2.MemoryCompletedStore
	*dataplane.MemoryRegistry
	*MemoryBindingStore
}

func newMemoryStore(clock imv2.Clock) *memoryStore {
	return &memoryStore{
		imv2.NewMemoryPendingStore(0),
		imv2.NewMemoryCompletedStore(0, 0, clock),
		dataplane.NewMemoryRegistry(0),
		NewMemoryBindingStore(0),
	}
}
