package dataplane

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestReplaced_Property: the map of replaced channel IDs under any
// sequence of reopens (each makes its ID live, then maps the reopened ID
// to it, as applyOpen does): it never holds more than MaxChannels entries,
// its order list names exactly its keys, Resolve ends at an ID with no
// successor, and the newest mapping of an ID still held is the one
// Resolve follows first.
func TestReplaced_Property(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 6).Draw(t, "MaxChannels")
		c := &Client{cfg: ClientConfig{Advanced: ClientAdvanced{MaxChannels: limit}}, replaced: map[string]string{}}
		ids := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h"})
		for i := range rapid.IntRange(0, 60).Draw(t, "ops") {
			old, id := ids.Draw(t, "old"), ids.Draw(t, "new")
			c.forgetReplacedLocked(id)
			if old == id {
				continue // a reopen answered with its own ID replaces nothing
			}
			c.recordReplacedLocked(old, id)
			if got := c.replaced[old]; got != id {
				t.Fatalf("op %d: %s maps to %q, want %s", i, old, got, id)
			}
			if len(c.replaced) > limit {
				t.Fatalf("op %d: %d entries, over %d", i, len(c.replaced), limit)
			}
			keys := make([]string, 0, len(c.replaced))
			for k := range c.replaced {
				keys = append(keys, k)
			}
			order := slices.Clone(c.replacedOrder)
			slices.Sort(keys)
			slices.Sort(order)
			if !slices.Equal(keys, order) {
				t.Fatalf("op %d: order %v, keys %v", i, c.replacedOrder, keys)
			}
			for _, x := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				end := c.resolveLocked(x)
				if _, more := c.replaced[end]; more {
					t.Fatalf("op %d: Resolve(%s) stopped at %s, which has a successor: a loop", i, x, end)
				}
			}
		}
	})
}
