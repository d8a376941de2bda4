package connector

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/xagentkit/imv2"
)

// TestFinalOrder_A8_M9_ShownInArrivalOrder_Property: finals of one channel
// arrive in order; every post fails retryable or not at random, and xAgent
// resends every rejected-retryable final in any order it likes. Whatever
// happens, what is shown is in arrival order, and once the platform
// recovers every final is shown.
func TestFinalOrder_A8_M9_ShownInArrivalOrder_Property(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fo, _ := newTestOrder(t, Pace{})
		n := rapid.IntRange(1, 30).Draw(rt, "finals")
		next := 0             // the next final to arrive
		var waiting []int     // rejected retryable: xAgent resends them
		var shown, lost []int // lost: rejected for good
		deliver := func(i int, healthy bool) {
			id := fmt.Sprint("m", i)
			if _, err := fo.admit("ch", id); err != nil {
				waiting = append(waiting, i) // busy
				return
			}
			outcome := 0 // shown
			if !healthy {
				outcome = rapid.IntRange(0, 2).Draw(rt, "outcome")
			}
			switch outcome {
			case 0:
				shown = append(shown, i)
				fo.settle("ch", id, nil, false)
			case 1:
				waiting = append(waiting, i)
				fo.settle("ch", id, imv2.NotPosted(errors.New("503")), false)
			case 2:
				lost = append(lost, i)
				fo.settle("ch", id, imv2.Refused(errors.New("refused")), false)
			}
		}
		for steps := 0; next < n || len(waiting) > 0; steps++ {
			healthy := steps > 200 // the platform recovers
			if next < n && (len(waiting) == 0 || rapid.Bool().Draw(rt, "arrive")) {
				next++
				deliver(next-1, healthy)
				continue
			}
			k := rapid.IntRange(0, len(waiting)-1).Draw(rt, "resend")
			i := waiting[k]
			waiting = slices.Delete(waiting, k, k+1)
			deliver(i, healthy)
			if steps > 10_000 {
				rt.Fatalf("finals %v never shown", waiting)
			}
		}
		if !slices.IsSorted(shown) {
			rt.Fatalf("shown %v; want arrival order", shown)
		}
		if len(shown)+len(lost) != n {
			rt.Fatalf("shown %v and lost %v of %d finals", shown, lost, n)
		}
	})
}
