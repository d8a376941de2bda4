package state_test

import (
	"context"
	"fmt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/state"
)

// countingRegistry is an author's own ChannelRegistry: here the memory
// one, counting the channel IDs registered.
type countingRegistry struct {
	*state.MemoryRegistry
	registered int
}

func (r *countingRegistry) Register(ctx context.Context, channelID string) error {
	r.registered++
	return r.MemoryRegistry.Register(ctx, channelID)
}

// A Store is four small interfaces: an author writes the one it needs
// (here the registry) and embeds the memory versions of the others. The
// optional capabilities of an embedded part stay visible to the kit: the
// memory completed store is a ClaimStore and the memory binding store a
// BindingUpdater.
func Example_oneInterfaceAtATime() {
	reg := &countingRegistry{MemoryRegistry: state.NewMemoryRegistry(0)}
	var st state.Store = struct {
		imv2.PendingStore
		imv2.ClaimStore
		*countingRegistry
		*state.MemoryBindingStore
	}{
		imv2.NewMemoryPendingStore(0),
		imv2.NewMemoryCompletedStore(0, 0, nil),
		reg,
		state.NewMemoryBindingStore(0),
	}
	err := st.Register(context.Background(), "ch_1")
	_, claims := st.(imv2.ClaimStore)
	_, updates := st.(state.BindingUpdater)
	fmt.Println(err, reg.registered, claims, updates)
	// Output: <nil> 1 true true
}
