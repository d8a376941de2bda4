package dataplane

import "github.com/xagentkit/imv2"

// sharedStores gives every Channel of one Server or Client the same
// default stores, so the documented caps hold across channels instead of
// multiplying per channel.
func sharedStores(o *imv2.Options) {
	if o.Pending == nil {
		o.Pending = imv2.NewMemoryPendingStore(0)
	}
	if o.Completed == nil {
		o.Completed = imv2.NewMemoryCompletedStore(0, 0, o.Clock) // nil: the system clock
	}
}
