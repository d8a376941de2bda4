package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/pgstore"
)

// TestGroupCommit_S8_BeginInAGroup: Begins share a group's transaction
// with Claims and Records, each deciding as alone: the owner's Begin marks
// its claim's post begun, another's changes nothing; and a group's
// takeovers report an orphan whose post never began Unposted, keeping
// what the claim knew (imv2.ClaimStarter).
func TestGroupCommit_S8_BeginInAGroup(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := openStore(t, srv.NewDatabase(t), pgstore.Options{Clock: clock, CompletedTTL: time.Hour})
	const ch = "cch_begin"
	for _, id := range []string{"began", "unposted", "rec"} {
		wantState(t, mustClaim(t, s, ch, id, fpOf(id), "a", time.Minute), imv2.ClaimAcquired)
	}
	run := func(calls ...*pgstore.GroupCall) {
		t.Helper()
		before := s.Commits()
		if after := s.RunGroup(calls); after != before+1 {
			t.Fatalf("the group committed %d transactions, want 1", after-before)
		}
		for _, c := range calls {
			if c.Err != nil {
				t.Fatalf("%s: %v", c.Message, c.Err)
			}
		}
	}
	claim := func(id, owner string) *pgstore.GroupCall {
		return &pgstore.GroupCall{Ctx: ctx, Channel: ch, Message: id, FP: fpOf(id), Owner: owner, Lease: time.Minute}
	}
	run(&pgstore.GroupCall{Ctx: ctx, Begin: true, Channel: ch, Message: "began", Owner: "a"},
		&pgstore.GroupCall{Ctx: ctx, Begin: true, Channel: ch, Message: "unposted", Owner: "not the owner"},
		claim("new", "a"),
		&pgstore.GroupCall{Ctx: ctx, Record: true, Channel: ch, Message: "rec", FP: fpOf("rec")})

	// Twice: a takeover keeps what the claim knew, and b never began.
	for _, owner := range []string{"b", "c"} {
		clock.Advance(time.Minute)
		calls := []*pgstore.GroupCall{claim("began", owner), claim("unposted", owner), claim("new", owner)}
		run(calls...)
		for _, c := range calls {
			if c.Claim.State != imv2.ClaimOrphaned || c.Claim.Unposted != (c.Message != "began") {
				t.Fatalf("%s taking over %s: %+v, want orphaned, Unposted %v", owner, c.Message, c.Claim, c.Message != "began")
			}
		}
	}
}

// TestClaim_S8_OlderReplicaReadsAsBegun: during a rolling upgrade a
// replica of schema version 8 or older writes claims without unposted_by, and takes
// over orphans without changing it. Either claim reads as begun, the safe
// side: its resend is answered outcome unknown, never posted blindly.
func TestClaim_S8_OlderReplicaReadsAsBegun(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{Clock: clock, CompletedTTL: time.Hour})
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// An old replica's claim, as its Claim statement writes it.
	now, oldFP := clock.Now().UnixNano(), fpOf("old")
	if _, err := c.Exec(ctx, `INSERT INTO imv2_claims (channel_id, message_id, owner, until_ns, fingerprint)
		VALUES ('ch', 'old', 'v7', $1, $2)`, now+int64(time.Minute), oldFP[:]); err != nil {
		t.Fatal(err)
	}
	// An old replica's takeover of a new replica's unposted claim.
	wantState(t, mustClaim(t, s, "ch", "taken", fpOf("taken"), "a", time.Minute), imv2.ClaimAcquired)
	if _, err := c.Exec(ctx, `UPDATE imv2_claims SET owner = 'v7' WHERE message_id = 'taken'`); err != nil {
		t.Fatal(err)
	}
	// A new replica's claim left unposted, for contrast.
	wantState(t, mustClaim(t, s, "ch", "new", fpOf("new"), "a", time.Minute), imv2.ClaimAcquired)
	clock.Advance(time.Minute)
	for id, unposted := range map[string]bool{"old": false, "taken": false, "new": true} {
		if cl := mustClaim(t, s, "ch", id, fpOf(id), "b", time.Minute); cl.State != imv2.ClaimOrphaned || cl.Unposted != unposted {
			t.Errorf("%s: %+v, want orphaned, Unposted %v", id, cl, unposted)
		}
	}
}
