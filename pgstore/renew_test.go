package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

func mustRenew(t *testing.T, r interface {
	RenewClaim(context.Context, string, string, string, time.Duration) (bool, error)
}, id, owner string, want bool) {
	t.Helper()
	held, err := r.RenewClaim(context.Background(), "ch", id, owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if held != want {
		t.Fatalf("RenewClaim(%s, %s) = %v, want %v", id, owner, held, want)
	}
}

// TestClaim_S8_A6_RenewKeepsTheClaim: a renewed claim stays held past its
// first lease; only its owner renews it, and a completed, released or
// taken-over claim is not renewed (nor revived).
func TestClaim_S8_A6_RenewKeepsTheClaim(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	r := replicas(t, 2, clock)
	a, b := r[0], r[1]
	fp := fpOf("hello")
	var _ imv2.ClaimRenewer = a

	wantState(t, mustClaim(t, a, "ch", "m1", fp, "owner-a", time.Minute), imv2.ClaimAcquired)
	clock.Advance(50 * time.Second)
	mustRenew(t, a, "m1", "owner-a", true)
	mustRenew(t, b, "m1", "owner-b", false) // not b's to renew
	clock.Advance(50 * time.Second)         // 100 s after the claim, 50 s after the renewal
	wantState(t, mustClaim(t, b, "ch", "m1", fp, "owner-b", time.Minute), imv2.ClaimHeld)
	clock.Advance(10 * time.Second) // the renewed lease ran out: b takes it over
	wantState(t, mustClaim(t, b, "ch", "m1", fp, "owner-b", time.Minute), imv2.ClaimOrphaned)
	mustRenew(t, a, "m1", "owner-a", false) // lost to b
	wantState(t, mustClaim(t, a, "ch", "m1", fp, "owner-a", time.Minute), imv2.ClaimHeld)

	if err := b.Record(ctx, "ch", "m1", fp); err != nil {
		t.Fatal(err)
	}
	mustRenew(t, b, "m1", "owner-b", false) // completed: nothing to renew
	wantState(t, mustClaim(t, a, "ch", "m1", fp, "owner-a", time.Minute), imv2.ClaimCompleted)

	wantState(t, mustClaim(t, a, "ch", "m2", fp, "owner-a", time.Minute), imv2.ClaimAcquired)
	if err := a.Release(ctx, "ch", "m2", "owner-a"); err != nil {
		t.Fatal(err)
	}
	mustRenew(t, a, "m2", "owner-a", false) // released: not revived
	wantState(t, mustClaim(t, b, "ch", "m2", fp, "owner-b", time.Minute), imv2.ClaimAcquired)
}

// TestClaim_S8_A6_RenewRacingATakeoverLeavesOneHolder: the owner renews a
// claim whose lease just ran out while another replica claims it, many
// times at once. Exactly one wins each time: the renewal (the other finds
// the claim held) or the takeover (the renewal reports it lost). Never
// both, which would let two owners post the message.
func TestClaim_S8_A6_RenewRacingATakeoverLeavesOneHolder(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	r := replicas(t, 2, clock)
	a, b := r[0], r[1]
	const n = 300
	for i := range n {
		wantState(t, mustClaim(t, a, "ch", fmt.Sprint("m", i), fpOf("x"), "owner-a", time.Minute), imv2.ClaimAcquired)
	}
	clock.Advance(time.Minute)
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		renewed, takenOver int
	)
	for i := range n {
		id := fmt.Sprint("m", i)
		wg.Add(2)
		var held bool
		var cl imv2.Claim
		var errs [2]error
		go func() { defer wg.Done(); held, errs[0] = a.RenewClaim(ctx, "ch", id, "owner-a", time.Minute) }()
		go func() { defer wg.Done(); cl, errs[1] = b.Claim(ctx, "ch", id, fpOf("x"), "owner-b", time.Minute) }()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		switch {
		case held && cl.State == imv2.ClaimHeld:
			renewed++
		case !held && cl.State == imv2.ClaimOrphaned:
			takenOver++
		default:
			t.Errorf("%s: renewal held=%v and the other replica's claim %v: two holders or none", id, held, cl.State)
		}
		mu.Unlock()
	}
	t.Logf("of %d races: %d renewals won, %d takeovers", n, renewed, takenOver)
}
