package pgstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/pgstore"
)

// TestGroupCommit_A6_S8_EachRowItsOwnOutcome runs Claims of messages in
// every state and Records as one group, one transaction: each call gets
// the outcome it would get alone (acquired, held, orphaned, taken over,
// completed), and the group's writes are those of the calls one by one.
func TestGroupCommit_A6_S8_EachRowItsOwnOutcome(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := openStore(t, srv.NewDatabase(t), pgstore.Options{Clock: clock, CompletedTTL: time.Hour})
	fp, old := fpOf("now"), fpOf("before")
	const ch = "cch_group"
	// The states before the group.
	wantState(t, mustClaim(t, s, ch, "done", old, "me", time.Minute), imv2.ClaimAcquired)
	if err := s.Record(ctx, ch, "done", old); err != nil {
		t.Fatal(err)
	}
	wantState(t, mustClaim(t, s, ch, "lapsed", old, "other", time.Second), imv2.ClaimAcquired)
	clock.Advance(2 * time.Second) // "lapsed"'s lease ends
	wantState(t, mustClaim(t, s, ch, "held", old, "other", time.Minute), imv2.ClaimAcquired)
	wantState(t, mustClaim(t, s, ch, "mine", old, "me", time.Minute), imv2.ClaimAcquired)
	wantState(t, mustClaim(t, s, ch, "recorded", old, "me", time.Minute), imv2.ClaimAcquired)

	cancelled, cancel := context.WithCancel(ctx)
	cancel() // a caller that gave up does not fail the others
	claim := func(c context.Context, id string) *pgstore.GroupCall {
		return &pgstore.GroupCall{Ctx: c, Channel: ch, Message: id, FP: fp, Owner: "me", Lease: time.Minute}
	}
	calls := []*pgstore.GroupCall{
		claim(cancelled, "lapsed"), claim(ctx, "new"), claim(ctx, "done"), claim(ctx, "held"), claim(ctx, "mine"),
		{Ctx: ctx, Record: true, Channel: ch, Message: "recorded", FP: fp},
		{Ctx: ctx, Record: true, Channel: ch, Message: "fresh", FP: fp},
	}
	before := s.Commits()
	if after := s.RunGroup(calls); after != before+1 {
		t.Fatalf("the group committed %d transactions, want 1", after-before)
	}
	for _, c := range calls {
		if c.Err != nil {
			t.Fatalf("%s: %v", c.Message, c.Err)
		}
	}
	want := map[string]imv2.Claim{
		"new":    {State: imv2.ClaimAcquired},
		"done":   {State: imv2.ClaimCompleted, Fingerprint: old},
		"held":   {State: imv2.ClaimHeld, Owner: "other", Until: clock.Now().Add(time.Minute)},
		"mine":   {State: imv2.ClaimOrphaned, Owner: "me", Fingerprint: old},
		"lapsed": {State: imv2.ClaimOrphaned, Owner: "other", Fingerprint: old},
	}
	for _, c := range calls[:5] {
		if w := want[c.Message]; c.Claim.State != w.State || c.Claim.Owner != w.Owner || c.Claim.Fingerprint != w.Fingerprint || !c.Claim.Until.Equal(w.Until) {
			t.Errorf("Claim(%s) = %+v, want %+v", c.Message, c.Claim, w)
		}
	}
	// What the group wrote, as another owner sees it.
	for id, w := range map[string]imv2.ClaimState{
		"new": imv2.ClaimHeld, "mine": imv2.ClaimHeld, "lapsed": imv2.ClaimHeld, // claimed by me now
		"held": imv2.ClaimHeld, "done": imv2.ClaimCompleted, "recorded": imv2.ClaimCompleted, "fresh": imv2.ClaimCompleted,
	} {
		got := mustClaim(t, s, ch, id, fpOf("third"), "third", time.Minute)
		wantOwner := "me"
		if id == "held" {
			wantOwner = "other"
		}
		if got.State != w || (w == imv2.ClaimHeld && got.Owner != wantOwner) || (w == imv2.ClaimCompleted && id != "done" && got.Fingerprint != fp) {
			t.Errorf("after the group, Claim(%s) by a third owner = %+v, want state %d (owner %q)", id, got, w, wantOwner)
		}
	}
}

// TestGroupCommit_S8_ConcurrentCallsShareCommits: Claims and Records of
// many channels at once share transactions, and each is durable and
// correct when its call returns.
func TestGroupCommit_S8_ConcurrentCallsShareCommits(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, srv.NewDatabase(t), pgstore.Options{})
	const channels, per = 32, 20
	fp := fpOf("x")
	before := s.Commits()
	var wg sync.WaitGroup
	errs := make(chan error, channels)
	for c := range channels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := "cch_" + strconv.Itoa(c)
			for i := range per {
				id := "m-" + strconv.Itoa(i)
				cl, err := s.Claim(ctx, ch, id, fp, "me", time.Minute)
				if err == nil && cl.State != imv2.ClaimAcquired {
					err = &imv2.Error{Message: "claim " + ch + "/" + id + " not acquired"}
				}
				if err == nil {
					err = s.Record(ctx, ch, id, fp)
				}
				if err == nil {
					var found bool
					_, found, err = s.Lookup(ctx, ch, id)
					if err == nil && !found {
						err = &imv2.Error{Message: ch + "/" + id + " not recorded after Record returned"}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	calls := int64(2 * channels * per)
	if commits := s.Commits() - before; commits >= calls || commits <= 0 {
		t.Fatalf("%d calls in %d transactions; want fewer transactions than calls", calls, commits)
	}
}
