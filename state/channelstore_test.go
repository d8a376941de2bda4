package state_test

import (
	"testing"

	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

func TestMemoryChannelStore_W11_Contract(t *testing.T) {
	for _, capacity := range []int{5, state.DefaultChannelStoreCap} {
		storetest.TestChannelStore(t, func(*testing.T) state.ChannelStore {
			return state.NewMemoryChannelStore(capacity)
		}, capacity, nil)
	}
	// NewMemoryChannelStore(0) holds the default cap.
	storetest.TestChannelStore(t, func(*testing.T) state.ChannelStore {
		return state.NewMemoryChannelStore(0)
	}, state.DefaultChannelStoreCap, nil)
}
