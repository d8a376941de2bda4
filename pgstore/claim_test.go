package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/pgstore"
)

var start = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

func fpOf(s string) imv2.Fingerprint {
	m := imv2.ChatMessage{Text: s}
	return imv2.FingerprintOf(&m)
}

// replicas opens n stores on one database, each with its own pool, as n
// Connector processes would, all timed by clock.
func replicas(t *testing.T, n int, clock clock.Clock) []*pgstore.Store {
	t.Helper()
	url := srv.NewDatabase(t)
	out := make([]*pgstore.Store, n)
	for i := range out {
		out[i] = openStore(t, url, pgstore.Options{Clock: clock, CompletedTTL: time.Hour})
	}
	return out
}

func mustClaim(t *testing.T, s *pgstore.Store, ch, id string, fp imv2.Fingerprint, owner string, lease time.Duration) imv2.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), ch, id, fp, owner, lease)
	if err != nil {
		t.Fatalf("Claim(%s/%s, %s): %v", ch, id, owner, err)
	}
	return c
}

func wantState(t *testing.T, got imv2.Claim, want imv2.ClaimState) {
	t.Helper()
	if got.State != want {
		t.Fatalf("Claim = %+v, want state %d", got, want)
	}
}

// TestClaim_S8_A6_Lifecycle walks one message through every ClaimState on
// two replicas, with leases timed by the injected clock: the server's
// clock never moves in this test, so a lease that followed it would never
// run out.
func TestClaim_S8_A6_Lifecycle(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	r := replicas(t, 2, clock)
	a, b := r[0], r[1]
	fp := fpOf("hello")

	wantState(t, mustClaim(t, a, "ch", "m1", fp, "owner-a", time.Minute), imv2.ClaimAcquired)
	// Another replica, another owner: held until the lease ends.
	held := mustClaim(t, b, "ch", "m1", fp, "owner-b", time.Minute)
	wantState(t, held, imv2.ClaimHeld)
	if held.Owner != "owner-a" || !held.Until.Equal(start.Add(time.Minute)) {
		t.Fatalf("held claim = %+v, want owner-a until %v", held, start.Add(time.Minute))
	}
	// The owner claiming again finds its own earlier attempt interrupted:
	// orphaned (the outcome is unknown), and the claim is renewed.
	clock.Advance(30 * time.Second)
	wantState(t, mustClaim(t, a, "ch", "m1", fp, "owner-a", time.Minute), imv2.ClaimOrphaned)
	clock.Advance(59 * time.Second)
	wantState(t, mustClaim(t, b, "ch", "m1", fp, "owner-b", time.Minute), imv2.ClaimHeld)
	// The lease runs out at exactly now+lease: the claim is orphaned and
	// passes to the caller, with the content the dead owner was posting.
	clock.Advance(time.Second)
	orphan := mustClaim(t, b, "ch", "m1", fpOf("other content"), "owner-b", time.Minute)
	wantState(t, orphan, imv2.ClaimOrphaned)
	if orphan.Owner != "owner-a" || orphan.Fingerprint != fp {
		t.Fatalf("orphaned claim = %+v, want former owner-a with the claimed fingerprint", orphan)
	}
	wantState(t, mustClaim(t, a, "ch", "m1", fp, "owner-a", time.Minute), imv2.ClaimHeld)

	// Release by a non-owner changes nothing; Record completes for all.
	if err := a.Release(ctx, "ch", "m1", "owner-a"); err != nil {
		t.Fatal(err)
	}
	wantState(t, mustClaim(t, a, "ch", "m1", fp, "owner-a", time.Minute), imv2.ClaimHeld)
	if err := b.Record(ctx, "ch", "m1", fp); err != nil {
		t.Fatal(err)
	}
	for _, s := range r {
		done := mustClaim(t, s, "ch", "m1", fpOf("x"), "owner-c", time.Minute)
		wantState(t, done, imv2.ClaimCompleted)
		if done.Fingerprint != fp {
			t.Fatalf("completed claim fingerprint %x, want the recorded %x", done.Fingerprint, fp)
		}
	}
	// Releasing after Record does not undo the record.
	if err := b.Release(ctx, "ch", "m1", "owner-b"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Lookup(ctx, "ch", "m1"); err != nil || !ok {
		t.Fatalf("record gone after Release: %v %v", ok, err)
	}

	// Release by the owner frees the message at once.
	wantState(t, mustClaim(t, a, "ch", "m2", fp, "owner-a", time.Hour), imv2.ClaimAcquired)
	if err := a.Release(ctx, "ch", "m2", "owner-a"); err != nil {
		t.Fatal(err)
	}
	wantState(t, mustClaim(t, b, "ch", "m2", fp, "owner-b", time.Hour), imv2.ClaimAcquired)

	// A record that expired no longer counts: the message is claimable.
	clock.Advance(time.Hour)
	wantState(t, mustClaim(t, b, "ch", "m1", fp, "owner-b", time.Minute), imv2.ClaimAcquired)
}

// TestClaim_A6_OneOfManyConcurrentClaimersAcquires: goroutines on two
// replicas claim the same messages at once; for each message exactly one
// acquires and every other one finds it held.
func TestClaim_A6_OneOfManyConcurrentClaimersAcquires(t *testing.T) {
	clock := fakeclock.New(start)
	r := replicas(t, 2, clock)
	const messages, claimers = 10, 16
	for m := range messages {
		id := fmt.Sprintf("m%d", m)
		var wg sync.WaitGroup
		results := make([]imv2.Claim, claimers)
		errs := make([]error, claimers)
		gate := make(chan struct{})
		for i := range claimers {
			wg.Go(func() {
				<-gate
				results[i], errs[i] = r[i%2].Claim(context.Background(), "ch", id, fpOf(id), fmt.Sprintf("owner-%d", i), time.Minute)
			})
		}
		close(gate)
		wg.Wait()
		acquired := 0
		for i, c := range results {
			if errs[i] != nil {
				t.Fatalf("claimer %d: %v", i, errs[i])
			}
			switch c.State {
			case imv2.ClaimAcquired:
				acquired++
			case imv2.ClaimHeld:
			default:
				t.Fatalf("claimer %d of %s: %+v, want acquired or held", i, id, c)
			}
		}
		if acquired != 1 {
			t.Fatalf("%s: %d of %d claimers acquired, want exactly 1", id, acquired, claimers)
		}
	}
}

// TestClaim_S8_NoClaimSlipsBetweenRecordAndClaim: while one replica
// records a message it holds, claimers on the other see it held or
// completed, never free.
func TestClaim_S8_NoClaimSlipsBetweenRecordAndClaim(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	r := replicas(t, 2, clock)
	for m := range 20 {
		id := fmt.Sprintf("m%d", m)
		wantState(t, mustClaim(t, r[0], "ch", id, fpOf(id), "holder", time.Minute), imv2.ClaimAcquired)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		wg.Go(func() {
			<-gate
			if err := r[0].Record(ctx, "ch", id, fpOf(id)); err != nil {
				t.Errorf("Record: %v", err)
			}
		})
		for i := range 4 {
			wg.Go(func() {
				<-gate
				c, err := r[1].Claim(ctx, "ch", id, fpOf(id), fmt.Sprintf("other-%d", i), time.Minute)
				if err != nil {
					t.Errorf("Claim: %v", err)
				} else if c.State != imv2.ClaimHeld && c.State != imv2.ClaimCompleted {
					t.Errorf("%s: claim during Record = %+v, want held or completed", id, c)
				}
			})
		}
		close(gate)
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

// TestClaim_S4_OrphanedClaimSweptAfterTTL: a claim nobody completes is
// kept a TTL past its lease (a resend may still come), then a Record
// sweeps it; DropChannel drops claims at once.
func TestClaim_S4_OrphanedClaimSweptAfterTTL(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(start)
	s := replicas(t, 1, clock)[0]
	fp := fpOf("x")
	wantState(t, mustClaim(t, s, "ch", "dead", fp, "gone", time.Minute), imv2.ClaimAcquired)
	clock.Advance(time.Minute + time.Hour - time.Nanosecond)
	if err := s.Record(ctx, "ch", "other", fp); err != nil {
		t.Fatal(err)
	}
	wantState(t, mustClaim(t, s, "ch", "dead", fp, "late", time.Minute), imv2.ClaimOrphaned)
	clock.Advance(time.Minute + time.Hour)
	if err := s.Record(ctx, "ch", "other2", fp); err != nil {
		t.Fatal(err)
	}
	wantState(t, mustClaim(t, s, "ch", "dead", fp, "later", time.Minute), imv2.ClaimAcquired)

	wantState(t, mustClaim(t, s, "gone", "m", fp, "owner", time.Hour), imv2.ClaimAcquired)
	if err := s.DropChannel(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	wantState(t, mustClaim(t, s, "gone", "m", fp, "new-owner", time.Hour), imv2.ClaimAcquired)
}

func TestClaim_BadInput(t *testing.T) {
	s := replicas(t, 1, fakeclock.New(start))[0]
	ctx := context.Background()
	for name, f := range map[string]func() error{
		"no owner":      func() error { _, err := s.Claim(ctx, "ch", "m", imv2.Fingerprint{}, "", time.Minute); return err },
		"zero lease":    func() error { _, err := s.Claim(ctx, "ch", "m", imv2.Fingerprint{}, "o", 0); return err },
		"no message_id": func() error { _, err := s.Claim(ctx, "ch", "", imv2.Fingerprint{}, "o", time.Minute); return err },
		"NUL channel":   func() error { return s.Release(ctx, "c\x00h", "m", "o") },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
