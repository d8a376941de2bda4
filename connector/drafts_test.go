package connector

import (
	"context"
	"fmt"
	"testing"

	"github.com/xagentkit/imv2/state"
)

// TestKit_M11_DraftRecordsCappedOldestFirstOut: the kit keeps at most
// MaxBindingDrafts handles per binding, dropping the oldest; a discarded
// draft's record goes, by its handle.
func TestKit_M11_DraftRecordsCappedOldestFirstOut(t *testing.T) {
	k, _ := newUnit(t, &editor{}, false, Options{})
	ctx := context.Background()
	for i := range state.MaxBindingDrafts + 3 {
		if _, err := k.out.PostDraft(ctx, "ch_1", fmt.Sprintf("m%d", i), "draft"); err != nil {
			t.Fatal(err)
		}
	}
	b, _, err := k.store.Binding(ctx, "ch_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Drafts) != state.MaxBindingDrafts || b.Drafts[0].MessageID != "m3" || b.Drafts[state.MaxBindingDrafts-1].Handle != fmt.Sprintf("h-m%d", state.MaxBindingDrafts+2) {
		t.Fatalf("%d records from %+v; want %d from m3", len(b.Drafts), b.Drafts[0], state.MaxBindingDrafts)
	}
	if err := k.out.Discard(ctx, "ch_1", "h-m3"); err != nil {
		t.Fatal(err)
	}
	b, _, _ = k.store.Binding(ctx, "ch_1")
	if len(b.Drafts) != state.MaxBindingDrafts-1 || b.Drafts[0].MessageID != "m4" {
		t.Fatalf("after the discard %d records from %+v; want m3's gone", len(b.Drafts), b.Drafts[0])
	}
}
