package pgstore_test

import (
	"testing"

	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

// TestStore_S8_W11_ChannelContract runs the shared ChannelStore suite,
// with a reopen: a new Store on the same database, as a restarted xAgent.
func TestStore_S8_W11_ChannelContract(t *testing.T) {
	o := newOpener()
	storetest.TestChannelStore(t, func(t *testing.T) state.ChannelStore {
		return o.open(t, srv.NewDatabase(t), pgstore.Options{})
	}, state.DefaultChannelStoreCap, func(t *testing.T, s state.ChannelStore) state.ChannelStore {
		return o.reopen(t, s.(*pgstore.Store))
	})
}
