package connector

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/xagentkit/imv2/state"
)

// TestKit_M11_DraftRecordsCappedOldestFirstOut: the kit keeps at most
// MaxBindingDrafts handles per binding, dropping the oldest; a discarded
// draft's record goes, by its handle.
func TestKit_M11_DraftRecordsCappedOldestFirstOut(t *testing.T) {
	k, _ := newUnit(t, discardingEditor{&editor{}}, false, Options{})
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

// discardingEditor is an editor that can remove a temporary message.
type discardingEditor struct{ *editor }

func (e discardingEditor) Discard(_ context.Context, _ Conversation, h string) error {
	e.log("discard " + h)
	return nil
}

// TestKit_M11_UndiscardableDraftKeepsItsRecord: without the author's
// Discarder an aged-out draft stays shown, so its record stays for the
// final (also after a restart) and the display is told ErrUnsupported.
func TestKit_M11_UndiscardableDraftKeepsItsRecord(t *testing.T) {
	k, _ := newUnit(t, &editor{}, false, Options{})
	ctx := context.Background()
	if _, err := k.out.PostDraft(ctx, "ch_1", "m1", "draft"); err != nil {
		t.Fatal(err)
	}
	if err := k.out.Discard(ctx, "ch_1", "h-m1"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Discard without a Discarder: %v; want ErrUnsupported", err)
	}
	if h, ok := k.out.recordedDraft(ctx, "ch_1", "m1"); !ok || h != "h-m1" {
		t.Fatalf("record %q %v after the failed discard; want h-m1 kept", h, ok)
	}
}
