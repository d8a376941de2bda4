package dataplane

import (
	"testing"

	"github.com/xagentkit/imv2/state"
)

// TestClient_W11_ChannelStoreCapIsMaxChannels: the default MemoryChannelStore
// holds as many channel IDs as the Client holds channels by default, so
// neither refuses what the other accepts. The two constants live in
// different packages (state sits below the data plane).
func TestClient_W11_ChannelStoreCapIsMaxChannels(t *testing.T) {
	if state.DefaultChannelStoreCap != DefaultMaxChannels {
		t.Fatalf("state.DefaultChannelStoreCap = %d, DefaultMaxChannels = %d", state.DefaultChannelStoreCap, DefaultMaxChannels)
	}
}
