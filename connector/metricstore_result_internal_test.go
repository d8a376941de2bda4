package connector

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// TestCountedStore_W13_KeepsResults: the kit's counted view of a store
// that keeps results (boltstore, the kit's memory store) keeps them too, so the data plane keeps
// a tool call's result for a replay after a restart (W13); without the
// pass-through the view hid the store's results.
func TestCountedStore_W13_KeepsResults(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, s := range []state.Store{st, newMemoryStore(nil)} {
		countedKeepsResults(t, s)
	}
}

func countedKeepsResults(t *testing.T, st state.Store) {
	t.Helper()
	view := newCountedStore(st, newKitMetrics(clock.System{}, func() int { return 0 }), clock.System{}).completed()
	rs, ok := view.(state.ResultStore)
	if !ok {
		t.Fatalf("the counted view of %T (%T) keeps no results", st, view)
	}
	if _, ok := view.(imv2.ClaimStore); !ok {
		t.Fatal("the counted view lost the claims")
	}
	ctx := context.Background()
	if err := rs.RecordResult(ctx, "ch", "t", imv2.Fingerprint{1}, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, r, ok, err := rs.LookupResult(ctx, "ch", "t"); err != nil || !ok || string(r) != `{"ok":true}` {
		t.Fatalf("LookupResult = %q, %v, %v", r, ok, err)
	}
}
