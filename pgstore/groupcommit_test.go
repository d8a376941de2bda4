package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/connid"
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

// TestGroupCommit_S8_A6_RenewRacingAGroupTakeoverLeavesOneHolder is
// TestClaim_S8_A6_RenewRacingATakeoverLeavesOneHolder with the takeover
// made by a group of claims (and a Record) on another replica: the
// owner's renewal of a claim whose lease just ran out races it, many times
// at once, and exactly one wins each time; the group's other calls get
// their own outcomes.
func TestGroupCommit_S8_A6_RenewRacingAGroupTakeoverLeavesOneHolder(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	r := replicas(t, 2, clock)
	a, b := r[0], r[1]
	const n = 300
	for i := range n {
		wantState(t, mustClaim(t, a, "ch", fmt.Sprint("m", i), fpOf("x"), "owner-a", time.Minute), imv2.ClaimAcquired)
	}
	clock.Advance(time.Minute)
	renewed, takenOver := 0, 0
	for i := range n {
		id := fmt.Sprint("m", i)
		claim := func(ch, id string) *pgstore.GroupCall {
			return &pgstore.GroupCall{Ctx: ctx, Channel: ch, Message: id, FP: fpOf("x"), Owner: "owner-b", Lease: time.Minute}
		}
		calls := []*pgstore.GroupCall{
			claim("ch-other", fmt.Sprint("o", i)), claim("ch", id), claim("ch-third", fmt.Sprint("t", i)),
			{Ctx: ctx, Record: true, Channel: "ch-rec", Message: fmt.Sprint("r", i), FP: fpOf("x")},
		}
		var wg sync.WaitGroup
		var held bool
		var err error
		wg.Add(2)
		go func() { defer wg.Done(); held, err = a.RenewClaim(ctx, "ch", id, "owner-a", time.Minute) }()
		go func() { defer wg.Done(); b.RunGroup(calls) }()
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if c.Err != nil {
				t.Fatalf("%s/%s: %v", c.Channel, c.Message, c.Err)
			}
		}
		for _, c := range []*pgstore.GroupCall{calls[0], calls[2]} {
			if c.Claim.State != imv2.ClaimAcquired {
				t.Fatalf("%s/%s beside the race: %+v, want acquired", c.Channel, c.Message, c.Claim)
			}
		}
		switch cl := calls[1].Claim; {
		case held && cl.State == imv2.ClaimHeld && cl.Owner == "owner-a":
			renewed++
		case !held && cl.State == imv2.ClaimOrphaned:
			takenOver++
		default:
			t.Errorf("%s: renewal held=%v and the group's claim %+v: two holders or none", id, held, cl)
		}
	}
	t.Logf("of %d races: %d renewals won, %d takeovers", n, renewed, takenOver)
}

// TestGroupCommit_S6_GroupFloodKeepsTheVictim: at the cap, groups of
// Records, one transaction each, of a flooding channel and of a channel
// new in the group (over its share by the group's records alone) evict
// the flood's older records, never the victim's (within its share and
// young), nor a record of the group itself (the trims' SKIP LOCKED does
// not skip their own transaction's rows); the counts stay exact and the
// table at the cap.
func TestGroupCommit_S6_GroupFloodKeepsTheVictim(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	const capacity = 40
	s := openStore(t, url, pgstore.Options{CompletedCap: capacity})
	fp := fpOf("x")
	// The oldest: the victim and 19 other channels of one record each,
	// all protected; then the flood's 20, to the cap.
	if err := s.Record(ctx, "victim", "v1", fp); err != nil {
		t.Fatal(err)
	}
	for i := range 19 {
		if err := s.Record(ctx, "small-"+strconv.Itoa(i), "s", fp); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if err := s.Record(ctx, "flood", "f"+strconv.Itoa(i), fp); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 10 {
		var calls []*pgstore.GroupCall
		for i := range 12 {
			ch := "burst-" + strconv.Itoa(round)
			if i >= 6 {
				ch = "flood"
			}
			calls = append(calls, &pgstore.GroupCall{Ctx: ctx, Record: true, Channel: ch, Message: fmt.Sprint(round, "-", i), FP: fp})
		}
		s.RunGroup(calls)
		for _, c := range calls {
			if c.Err != nil {
				t.Fatal(c.Err)
			}
			if _, ok, err := s.Lookup(ctx, c.Channel, c.Message); err != nil || !ok {
				t.Fatalf("round %d: the group's own %s/%s: found=%v, %v", round, c.Channel, c.Message, ok, err)
			}
		}
		if _, ok, err := s.Lookup(ctx, "victim", "v1"); err != nil || !ok {
			t.Fatalf("round %d: the victim's record: found=%v, %v", round, ok, err)
		}
		if st, err := s.Stats(ctx); err != nil || st.Completed > capacity {
			t.Fatalf("round %d: Stats = %+v, %v; want at most %d completed", round, st, err, capacity)
		}
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	checkCounts(t, c)
}

// TestGroupCommit_S8_TrimsKeepTheGroupsOwnRecords: a group of Records
// that takes the store over its cap, its records the only ones not
// protected (their channel far over its share, the others within
// theirs), keeps every one of them: the group's trims skip the records
// its own transaction wrote, which SKIP LOCKED would not skip, and an
// accepted ack always has its record behind it.
func TestGroupCommit_S8_TrimsKeepTheGroupsOwnRecords(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, srv.NewDatabase(t), pgstore.Options{CompletedCap: 6})
	fp := fpOf("x")
	for _, ch := range []string{"a", "b"} {
		if err := s.Record(ctx, ch, ch+"1", fp); err != nil {
			t.Fatal(err)
		}
	}
	var calls []*pgstore.GroupCall
	for i := range 6 {
		calls = append(calls, &pgstore.GroupCall{Ctx: ctx, Record: true, FP: fp, Channel: "flood", Message: "f" + strconv.Itoa(i)})
	}
	s.RunGroup(calls)
	for _, c := range calls {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
		if _, ok, err := s.Lookup(ctx, c.Channel, c.Message); err != nil || !ok {
			t.Errorf("%s/%s: its group's trims took it (%v)", c.Channel, c.Message, err)
		}
	}
}

// TestGroupCommit_A6_RecordsEndTheirClaims: a group of Records ends the
// claims of its messages, whoever held them, and no other: the claims
// table keeps only the claim of the message not recorded.
func TestGroupCommit_A6_RecordsEndTheirClaims(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	fp := fpOf("x")
	var calls []*pgstore.GroupCall
	for i := range 5 {
		id := "m" + strconv.Itoa(i)
		if cl, err := s.Claim(ctx, "ch", id, fp, "owner-"+strconv.Itoa(i%2), time.Minute); err != nil || cl.State != imv2.ClaimAcquired {
			t.Fatalf("claim %s: %+v %v", id, cl, err)
		}
		if i < 4 {
			calls = append(calls, &pgstore.GroupCall{Ctx: ctx, Record: true, FP: fp, Channel: "ch", Message: id})
		}
	}
	s.RunGroup(calls)
	for _, c := range calls {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var left []string
	if err := c.QueryRow(ctx, "SELECT array_agg(convert_from(message_id, 'UTF8') ORDER BY message_id) FROM imv2_claims").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[m4]" {
		t.Fatalf("claims left after the group's Records: %v; want [m4]", left)
	}
}

// TestGroupCommit_S6_NewChannelJoinsItsRecordsLeastConnector: a channel
// first recorded by a group of Records of different connector_ids joins
// one group, the least connector_id (as when they come one by one in
// that order), and each channel its own Records' least.
func TestGroupCommit_S6_NewChannelJoinsItsRecordsLeastConnector(t *testing.T) {
	bg := context.Background()
	url := srv.NewDatabase(t)
	s := openStore(t, url, pgstore.Options{})
	fp := fpOf("x")
	var calls []*pgstore.GroupCall
	for i, k := range [][2]string{{"c1", "conn-b"}, {"c2", "conn-c"}, {"c1", "conn-a"}, {"c2", "conn-d"}, {"c1", "conn-c"}} {
		calls = append(calls, &pgstore.GroupCall{Ctx: connid.WithConnectorID(bg, k[1]), Record: true, FP: fp,
			Channel: k[0], Message: "m" + strconv.Itoa(i)})
	}
	s.RunGroup(calls)
	for _, c := range calls {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	c, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	var got []string
	if err := c.QueryRow(bg, `SELECT array_agg(convert_from(channel_id, 'UTF8') || '=' || convert_from(connector_id, 'UTF8') || '/' || n
		ORDER BY channel_id) FROM imv2_completed_channels`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[c1=conn-a/3 c2=conn-c/2]" {
		t.Fatalf("channels' groups and counts %v; want [c1=conn-a/3 c2=conn-c/2]", got)
	}
}
