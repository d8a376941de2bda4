package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
)

// ClaimFactory returns a new, empty ClaimStore timed by clock, keeping
// completed records for ttl. It registers its own cleanup with t.Cleanup.
type ClaimFactory func(t *testing.T, ttl time.Duration, clock clock.Clock) imv2.ClaimStore

// ClaimReopener closes s and returns a store on the same data, opened anew
// with the same settings, as after a process restart (or a crash: a store
// must not count on having been closed cleanly).
type ClaimReopener func(t *testing.T, s imv2.ClaimStore) imv2.ClaimStore

// TestClaimStore runs the ClaimStore contract (S8, A6 across processes)
// against stores made by newStore. reopen may be nil for a store that is
// not durable; a durable one must report every claim made before the
// reopen as orphaned, whatever its lease.
//
// What the suite pins down beyond the interface comments: a claim is held
// for other owners while now < claimed+lease, so it is orphaned at exactly
// lease; a second Claim by the owner of a live claim is ClaimOrphaned.
func TestClaimStore(t *testing.T, newStore ClaimFactory, reopen ClaimReopener) {
	t.Run("S8_Acquire", func(t *testing.T) { claimAcquire(t, newStore) })
	t.Run("A6_HeldByAnotherOwner", func(t *testing.T) { claimHeld(t, newStore) })
	t.Run("S8_SameOwnerAgainIsOrphaned", func(t *testing.T) { claimSameOwner(t, newStore) })
	t.Run("S8_LeaseExpiryOrphans", func(t *testing.T) { claimLease(t, newStore) })
	t.Run("S6_Completed", func(t *testing.T) { claimCompleted(t, newStore) })
	t.Run("S8_Release", func(t *testing.T) { claimRelease(t, newStore) })
	t.Run("S7_DropChannelDropsClaims", func(t *testing.T) { claimDrop(t, newStore) })
	t.Run("A6_ConcurrentOwnersOneAcquires", func(t *testing.T) { claimConcurrent(t, newStore) })
	t.Run("S6_OrphanTakeoverKeepsFingerprint", func(t *testing.T) { claimTakeoverKeepsFingerprint(t, newStore) })
	t.Run("S8_HandoverCopiesClaims", func(t *testing.T) { claimHandover(t, newStore) })
	t.Run("S8_StarterTellsAnUnpostedOrphan", func(t *testing.T) { claimStarter(t, newStore, nil) })
	if reopen != nil {
		t.Run("S8_ReopenOrphans", func(t *testing.T) { claimReopen(t, newStore, reopen) })
		t.Run("S8_StarterSurvivesReopen", func(t *testing.T) { claimStarter(t, newStore, reopen) })
		t.Run("S8_HandoverAfterReopenStaysOrphaned", func(t *testing.T) { claimHandoverReopen(t, newStore, reopen) })
	}
}

const lease = time.Minute

func mustClaim(t *testing.T, s imv2.ClaimStore, ch, id string, fp imv2.Fingerprint, owner string) imv2.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), ch, id, fp, owner, lease)
	if err != nil {
		t.Fatalf("Claim(%s, %s, %s): %v", ch, id, owner, err)
	}
	return c
}

func wantClaim(t *testing.T, got imv2.Claim, state imv2.ClaimState, fp imv2.Fingerprint, owner string) {
	t.Helper()
	if got.State != state {
		t.Fatalf("Claim state %d, want %d (%+v)", got.State, state, got)
	}
	if state == imv2.ClaimCompleted || state == imv2.ClaimOrphaned {
		if got.Fingerprint != fp {
			t.Fatalf("Claim state %d: fingerprint %x, want %x", state, got.Fingerprint[:4], fp[:4])
		}
	}
	if state == imv2.ClaimHeld || state == imv2.ClaimOrphaned {
		if got.Owner != owner {
			t.Fatalf("Claim state %d: owner %q, want %q", state, got.Owner, owner)
		}
	}
}

func mustRelease(t *testing.T, s imv2.ClaimStore, ch, id, owner string) {
	t.Helper()
	if err := s.Release(context.Background(), ch, id, owner); err != nil {
		t.Fatalf("Release(%s, %s, %s): %v", ch, id, owner, err)
	}
}

func claimAcquire(t *testing.T, newStore ClaimFactory) {
	s := newStore(t, time.Hour, fakeclock.New(start))
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "a"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
	// Other messages and channels are other claims.
	wantClaim(t, mustClaim(t, s, "ch", "m2", fpOf("two"), "b"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
	wantClaim(t, mustClaim(t, s, "other", "m1", fpOf("one"), "b"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
	// A claim is not a completed record.
	wantLookup(t, s, "ch", "m1", imv2.Fingerprint{}, false)
}

func claimHeld(t *testing.T, newStore ClaimFactory) {
	s := newStore(t, time.Hour, fakeclock.New(start))
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	got := mustClaim(t, s, "ch", "m1", fpOf("one"), "b")
	wantClaim(t, got, imv2.ClaimHeld, imv2.Fingerprint{}, "a")
	if !got.Until.Equal(start.Add(lease)) {
		t.Fatalf("held until %v, want %v", got.Until, start.Add(lease))
	}
	// Asking does not take it: a later ask finds a still held.
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "c"), imv2.ClaimHeld, imv2.Fingerprint{}, "a")
}

func claimSameOwner(t *testing.T, newStore ClaimFactory) {
	s := newStore(t, time.Hour, fakeclock.New(start))
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "a"), imv2.ClaimOrphaned, fpOf("one"), "a")
}

func claimLease(t *testing.T, newStore ClaimFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, time.Hour, clock)
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	clock.Advance(lease - time.Nanosecond)
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "b"), imv2.ClaimHeld, imv2.Fingerprint{}, "a")
	clock.Advance(time.Nanosecond)
	// At lease the owner counts as gone: b takes the orphan, told its content.
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "b"), imv2.ClaimOrphaned, fpOf("one"), "a")
	// It is b's now, for a new lease.
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "a"), imv2.ClaimHeld, imv2.Fingerprint{}, "b")
	clock.Advance(lease)
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "c"), imv2.ClaimOrphaned, fpOf("one"), "b")
}

// claimTakeoverKeepsFingerprint: taking over an orphan keeps the content
// of the interrupted attempt, whatever content the taker brought. A copy
// with other content is a conflict the caller refuses; it must not make
// the real resend (the content that may have been posted) a conflict too.
func claimTakeoverKeepsFingerprint(t *testing.T, newStore ClaimFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, time.Hour, clock)
	mustClaim(t, s, "ch", "m1", fpOf("real"), "a")
	clock.Advance(lease)
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("forged"), "b"), imv2.ClaimOrphaned, fpOf("real"), "a")
	// b's takeover changed owner and lease only.
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("real"), "c"), imv2.ClaimHeld, imv2.Fingerprint{}, "b")
	clock.Advance(lease)
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("real"), "c"), imv2.ClaimOrphaned, fpOf("real"), "b")
	// The same owner claiming again is a takeover too.
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("forged"), "c"), imv2.ClaimOrphaned, fpOf("real"), "c")
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("real"), "c"), imv2.ClaimOrphaned, fpOf("real"), "c")
}

// claimHandover: a handover copies the claims of from to to as they are
// (content, owner, lease), so a resend moved to the new ID finds the
// interrupted attempt instead of a free message; from keeps its claims.
func claimHandover(t *testing.T, newStore ClaimFactory) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := newStore(t, time.Hour, clock)
	mustClaim(t, s, "from", "m1", fpOf("one"), "a")
	mustClaim(t, s, "from", "m2", fpOf("two"), "a")
	mustRecord(t, s, "from", "m2", fpOf("two"))
	mustClaim(t, s, "fromx", "m3", fpOf("three"), "a") // shares from's prefix
	clock.Advance(lease / 2)
	if err := s.Handover(ctx, "from", "to"); err != nil {
		t.Fatalf("Handover: %v", err)
	}
	if err := s.Handover(ctx, "from", "to"); err != nil { // a repeat changes nothing
		t.Fatalf("Handover again: %v", err)
	}
	got := mustClaim(t, s, "to", "m1", fpOf("one"), "b")
	wantClaim(t, got, imv2.ClaimHeld, imv2.Fingerprint{}, "a")
	if !got.Until.Equal(start.Add(lease)) {
		t.Fatalf("copied claim held until %v, want the original's %v", got.Until, start.Add(lease))
	}
	wantClaim(t, mustClaim(t, s, "to", "m2", fpOf("two"), "b"), imv2.ClaimCompleted, fpOf("two"), "")
	wantClaim(t, mustClaim(t, s, "to", "m3", fpOf("three"), "b"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
	wantClaim(t, mustClaim(t, s, "from", "m1", fpOf("one"), "b"), imv2.ClaimHeld, imv2.Fingerprint{}, "a")
	clock.Advance(lease / 2)
	wantClaim(t, mustClaim(t, s, "to", "m1", fpOf("other"), "b"), imv2.ClaimOrphaned, fpOf("one"), "a")
	// A handover onto a channel that has its own claim keeps that one.
	mustClaim(t, s, "from", "m4", fpOf("four"), "a")
	mustClaim(t, s, "to", "m4", fpOf("mine"), "c")
	if err := s.Handover(ctx, "from", "to"); err != nil {
		t.Fatalf("Handover: %v", err)
	}
	wantClaim(t, mustClaim(t, s, "to", "m4", fpOf("mine"), "b"), imv2.ClaimHeld, imv2.Fingerprint{}, "c")
}

// claimHandoverReopen: the kill -9 case. A claim made before a crash is
// handed over after the restart to the new ID, and is orphaned there as
// on from: its owner is gone.
func claimHandoverReopen(t *testing.T, newStore ClaimFactory, reopen ClaimReopener) {
	ctx := context.Background()
	s := newStore(t, time.Hour, fakeclock.New(start))
	mustClaim(t, s, "from", "m1", fpOf("one"), "a")
	s = reopen(t, s)
	if err := s.Handover(ctx, "from", "to"); err != nil {
		t.Fatalf("Handover: %v", err)
	}
	wantClaim(t, mustClaim(t, s, "to", "m1", fpOf("one"), "b"), imv2.ClaimOrphaned, fpOf("one"), "a")
	wantClaim(t, mustClaim(t, s, "from", "m1", fpOf("one"), "b"), imv2.ClaimOrphaned, fpOf("one"), "a")
}

func claimCompleted(t *testing.T, newStore ClaimFactory) {
	clock := fakeclock.New(start)
	s := newStore(t, time.Hour, clock)
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	mustRecord(t, s, "ch", "m1", fpOf("one"))
	for _, owner := range []string{"a", "b"} {
		wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("other"), owner), imv2.ClaimCompleted, fpOf("one"), "")
	}
	// A record made without a claim completes the message too.
	mustRecord(t, s, "ch", "m2", fpOf("two"))
	wantClaim(t, mustClaim(t, s, "ch", "m2", fpOf("two"), "a"), imv2.ClaimCompleted, fpOf("two"), "")
	// Record removed the claim: once the record expired, the message is
	// free again rather than orphaned.
	clock.Advance(time.Hour)
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "b"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
}

func claimRelease(t *testing.T, newStore ClaimFactory) {
	s := newStore(t, time.Hour, fakeclock.New(start))
	mustRelease(t, s, "ch", "none", "a") // nothing to release: no error
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	mustRelease(t, s, "ch", "m1", "b") // not b's: changes nothing
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "b"), imv2.ClaimHeld, imv2.Fingerprint{}, "a")
	mustRelease(t, s, "ch", "m1", "a")
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "b"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
	wantLookup(t, s, "ch", "m1", imv2.Fingerprint{}, false)
}

func claimDrop(t *testing.T, newStore ClaimFactory) {
	s := newStore(t, time.Hour, fakeclock.New(start))
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	mustClaim(t, s, "keep", "m1", fpOf("one"), "a")
	if err := s.DropChannel(context.Background(), "ch"); err != nil {
		t.Fatalf("DropChannel: %v", err)
	}
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "b"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
	wantClaim(t, mustClaim(t, s, "keep", "m1", fpOf("one"), "b"), imv2.ClaimHeld, imv2.Fingerprint{}, "a")
}

func claimConcurrent(t *testing.T, newStore ClaimFactory) {
	s := newStore(t, time.Hour, fakeclock.New(start))
	const owners, messages = 8, 4
	got := make([][messages]imv2.Claim, owners)
	errs := make([]error, owners)
	together(owners, func(o int) {
		for m := range messages {
			c, err := s.Claim(context.Background(), "ch", fmt.Sprintf("m%d", m), fpOf("x"), fmt.Sprintf("owner%d", o), lease)
			if err != nil {
				errs[o] = err
				return
			}
			got[o][m] = c
		}
	})
	for o, err := range errs {
		if err != nil {
			t.Fatalf("owner%d: %v", o, err)
		}
	}
	for m := range messages {
		acquired, held := 0, 0
		for o := range owners {
			switch got[o][m].State {
			case imv2.ClaimAcquired:
				acquired++
			case imv2.ClaimHeld:
				held++
			}
		}
		if acquired != 1 || held != owners-1 {
			t.Fatalf("m%d claimed by %d owners at once: %d acquired, %d held; want 1 and %d", m, owners, acquired, held, owners-1)
		}
	}
}

// claimStarter: a ClaimStarter reports an orphan whose post never began
// Unposted, and one whose owner called Begin not; a takeover keeps what
// the claim knew until the new owner begins; across a reopen too (reopen
// nil: none). A store that is no ClaimStarter is not tested here.
func claimStarter(t *testing.T, newStore ClaimFactory, reopen ClaimReopener) {
	clock := fakeclock.New(start)
	s := newStore(t, time.Hour, clock)
	if _, ok := s.(imv2.ClaimStarter); !ok {
		return
	}
	ctx := context.Background()
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	mustClaim(t, s, "ch", "m2", fpOf("two"), "a")
	if err := s.(imv2.ClaimStarter).Begin(ctx, "ch", "m2", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.(imv2.ClaimStarter).Begin(ctx, "ch", "m1", "not the owner"); err != nil {
		t.Fatal(err)
	}
	if reopen != nil {
		s = reopen(t, s)
	} else {
		clock.Advance(lease)
	}
	st := s.(imv2.ClaimStarter)
	if cl := mustClaim(t, s, "ch", "m1", fpOf("one"), "b"); cl.State != imv2.ClaimOrphaned || !cl.Unposted {
		t.Fatalf("orphan whose post never began: %+v, want orphaned and Unposted", cl)
	}
	if cl := mustClaim(t, s, "ch", "m2", fpOf("two"), "b"); cl.State != imv2.ClaimOrphaned || cl.Unposted {
		t.Fatalf("orphan whose post began: %+v, want orphaned, not Unposted", cl)
	}
	// b holds both; its lease ends: m2 still began, m1 still did not,
	// until b begins it.
	clock.Advance(lease)
	if cl := mustClaim(t, s, "ch", "m2", fpOf("two"), "c"); cl.Unposted {
		t.Fatalf("a takeover forgot the post had begun: %+v", cl)
	}
	if err := st.Begin(ctx, "ch", "m1", "b"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(lease)
	if cl := mustClaim(t, s, "ch", "m1", fpOf("one"), "c"); cl.State != imv2.ClaimOrphaned || cl.Unposted {
		t.Fatalf("orphan whose taker began it: %+v, want not Unposted", cl)
	}
}

func claimReopen(t *testing.T, newStore ClaimFactory, reopen ClaimReopener) {
	s := newStore(t, time.Hour, fakeclock.New(start))
	mustClaim(t, s, "ch", "m1", fpOf("one"), "a")
	mustClaim(t, s, "ch", "m2", fpOf("two"), "a")
	mustRecord(t, s, "ch", "m2", fpOf("two"))
	mustClaim(t, s, "ch", "m3", fpOf("three"), "a")
	mustRelease(t, s, "ch", "m3", "a")
	s = reopen(t, s)
	// Well within its lease, a's claim is orphaned: a is gone.
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "b"), imv2.ClaimOrphaned, fpOf("one"), "a")
	wantClaim(t, mustClaim(t, s, "ch", "m2", fpOf("two"), "b"), imv2.ClaimCompleted, fpOf("two"), "")
	wantClaim(t, mustClaim(t, s, "ch", "m3", fpOf("three"), "b"), imv2.ClaimAcquired, imv2.Fingerprint{}, "")
	// A claim made after the reopen is live as usual.
	wantClaim(t, mustClaim(t, s, "ch", "m1", fpOf("one"), "c"), imv2.ClaimHeld, imv2.Fingerprint{}, "b")
}
