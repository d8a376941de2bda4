package state_test

import (
	"testing"

	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

func TestMemoryBindingStore_W6_Contract(t *testing.T) {
	storetest.TestBindingStore(t, func(*testing.T) state.BindingStore { return state.NewMemoryBindingStore(0) }, nil)
}

func TestMemoryBindingStore_Cap(t *testing.T) {
	s := state.NewMemoryBindingStore(1)
	ctx := t.Context()
	b := state.Binding{ChannelID: "ch_1", Key: "k", State: state.BindingConnected}
	if _, err := s.Bind(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Key = "k2"
	if _, err := s.Bind(ctx, b); err != nil {
		t.Fatalf("rebinding within the cap: %v", err)
	}
	if _, err := s.Bind(ctx, state.Binding{ChannelID: "ch_2", Key: "k", State: state.BindingConnected}); err == nil {
		t.Fatal("a binding beyond the cap was stored")
	}
}

func TestMemoryBindingStore_W6_Cap(t *testing.T) {
	storetest.TestBindingCap(t, func(_ *testing.T, capacity int) state.BindingStore {
		return state.NewMemoryBindingStore(capacity)
	})
}
