package connector_test

import (
	"testing"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/storetest"
)

func TestMemoryBindingStore_W6_Contract(t *testing.T) {
	storetest.TestBindingStore(t, func(*testing.T) connector.BindingStore { return connector.NewMemoryBindingStore(0) }, nil)
}

func TestMemoryBindingStore_Cap(t *testing.T) {
	s := connector.NewMemoryBindingStore(1)
	ctx := t.Context()
	b := connector.Binding{ChannelID: "ch_1", Key: "k", State: connector.BindingConnected}
	if _, err := s.Bind(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Key = "k2"
	if _, err := s.Bind(ctx, b); err != nil {
		t.Fatalf("rebinding within the cap: %v", err)
	}
	if _, err := s.Bind(ctx, connector.Binding{ChannelID: "ch_2", Key: "k", State: connector.BindingConnected}); err == nil {
		t.Fatal("a binding beyond the cap was stored")
	}
}

func TestMemoryBindingStore_W6_Cap(t *testing.T) {
	storetest.TestBindingCap(t, func(_ *testing.T, capacity int) connector.BindingStore {
		return connector.NewMemoryBindingStore(capacity)
	})
}
