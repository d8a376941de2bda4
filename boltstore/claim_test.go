package boltstore

import (
	"context"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

// TestSweep_S8_DropsStaleClaimsOnly: an orphan nobody completes (its
// outcome was unknown) is swept once its lease ended CompletedTTL ago; a
// younger one stays orphaned.
func TestSweep_S8_DropsStaleClaimsOnly(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(t0)
	s := openTest(t, Options{Clock: clock, CompletedTTL: time.Hour})
	fp := imv2.Fingerprint{1}
	for _, id := range []string{"old", "young"} {
		if _, err := s.Claim(ctx, "a", id, fp, "dead", time.Minute); err != nil {
			t.Fatal(err)
		}
		clock.Advance(30 * time.Minute)
	}
	clock.Advance(20 * time.Minute) // "old": lease ended 79 min ago; "young": 49 min ago
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]imv2.ClaimState{"old": imv2.ClaimAcquired, "young": imv2.ClaimOrphaned}
	for id, state := range want {
		c, err := s.Claim(ctx, "a", id, fp, "next", time.Minute)
		if err != nil || c.State != state {
			t.Fatalf("Claim(%s) after Sweep = %d, %v; want %d", id, c.State, err, state)
		}
	}
}
