package connector

import (
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// TestUploadSlots_FloorsProperty: under any sequence of takes and
// releases by up to 80 peers, at most the floors of uploadPeers peers and
// the pool are held, the map holds only peers holding slots, no peer
// holds more than its floor and the pool, and while fewer than
// uploadPeers peers hold slots a peer holding nothing always gets one
// (issue 37: one peer's uploads cannot take the slot another needs).
func TestUploadSlots_FloorsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pool := rapid.IntRange(0, 8).Draw(t, "pool")
		s := newUploadSlots(pool)
		held := map[string]int{}
		for i := range rapid.IntRange(1, 300).Draw(t, "ops") {
			peer := "c" + strconv.Itoa(rapid.IntRange(0, 79).Draw(t, "peer"))
			if rapid.Bool().Draw(t, "take") {
				if s.take(peer) {
					held[peer]++
				} else if held[peer] == 0 && len(held) < uploadPeers {
					t.Fatalf("op %d: %s holds nothing and %d peers hold slots, yet it got none", i, peer, len(held))
				}
			} else if held[peer] > 0 {
				s.release(peer)
				if held[peer]--; held[peer] == 0 {
					delete(held, peer)
				}
			}
			total := 0
			for p, n := range held {
				total += n
				if n > uploadSlotFloor+pool {
					t.Fatalf("op %d: %s holds %d slots, over its floor and the pool", i, p, n)
				}
			}
			if total > uploadPeers*uploadSlotFloor+pool || s.floors+s.pooled != total || s.pooled > pool {
				t.Fatalf("op %d: %d held (%d floors, %d pooled of %d)", i, total, s.floors, s.pooled, pool)
			}
			if len(s.peers) != len(held) {
				t.Fatalf("op %d: the map holds %d peers, %d hold slots", i, len(s.peers), len(held))
			}
		}
	})
}
