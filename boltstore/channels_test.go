package boltstore_test

import (
	"testing"

	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

// TestStore_S8_W11_ChannelContract runs the shared ChannelStore suite:
// the xAgent side's connector_id and channel IDs outlive the process, in
// the order added, at most state.DefaultChannelStoreCap of them.
func TestStore_S8_W11_ChannelContract(t *testing.T) {
	o := newOpener()
	storetest.TestChannelStore(t, func(t *testing.T) state.ChannelStore {
		return o.open(t, tempPath(t), boltstore.Options{})
	}, state.DefaultChannelStoreCap, func(t *testing.T, s state.ChannelStore) state.ChannelStore {
		return o.reopen(t, s.(*boltstore.Store))
	})
}
