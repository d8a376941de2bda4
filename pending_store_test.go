package imv2

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestMemoryPendingStore_S1_EmptiedListServesTheNextChannelClean: the list
// of a channel whose last entry was removed is kept as the store's spare
// and given to the next channel that needs one; it carries nothing of the
// first channel into the second, and the first starts clean again.
func TestMemoryPendingStore_S1_EmptiedListServesTheNextChannelClean(t *testing.T) {
	s := newMemoryPendingStore(0)
	ctx := context.Background()
	entry := func(ch, id string) PendingEntry {
		return PendingEntry{ChannelID: ch, Message: ChatMessage{MessageID: id, Text: id}, Created: time.Unix(1, 0)}
	}
	ids := func(ch string) []string {
		es, err := s.List(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Message.MessageID)
		}
		return out
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		if err := s.Add(ctx, entry("cch_a", id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a2", "a1", "a3"} {
		if err := s.Remove(ctx, "cch_a", id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Add(ctx, entry("cch_b", "b1")); err != nil {
		t.Fatal(err)
	}
	if got := ids("cch_b"); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("cch_b holds %q, want only b1", got)
	}
	if got := ids("cch_a"); len(got) != 0 {
		t.Fatalf("cch_a holds %q after its last removal", got)
	}
	if err := s.Add(ctx, entry("cch_a", "a4")); err != nil {
		t.Fatal(err)
	}
	if got := ids("cch_a"); !slices.Equal(got, []string{"a4"}) {
		t.Fatalf("cch_a holds %q, want only a4", got)
	}
	if s.Len("cch_b") != 1 || s.Len("cch_a") != 1 {
		t.Fatalf("lengths %d and %d, want 1 and 1", s.Len("cch_a"), s.Len("cch_b"))
	}
}
