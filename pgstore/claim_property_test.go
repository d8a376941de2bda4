package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/pgstore"
)

// claimModel is what ClaimStore's godoc says one message's state is.
type claimModel struct {
	done     bool
	doneFP   imv2.Fingerprint
	recorded time.Time
	claimed  bool
	owner    string
	until    time.Time
	claimFP  imv2.Fingerprint
}

// TestClaim_Property_S8_A6_MatchesModel drives two replicas through random
// Claim, Release, Record and clock moves on a few messages, and checks
// every answer against the model of claim.go's godoc.
func TestClaim_Property_S8_A6_MatchesModel(t *testing.T) {
	const ttl = time.Hour
	clock := fakeclock.New(start)
	url := srv.NewDatabase(t)
	r := []*pgstore.Store{
		openStore(t, url, pgstore.Options{Clock: clock, CompletedTTL: ttl}),
		openStore(t, url, pgstore.Options{Clock: clock, CompletedTTL: ttl}),
	}
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		run++
		ch := fmt.Sprintf("run-%d", run) // each run on channels of its own
		models := map[string]*claimModel{"m1": {}, "m2": {}}
		msg := rapid.SampledFrom([]string{"m1", "m2"})
		owner := rapid.SampledFrom([]string{"a", "b", "c"})
		content := rapid.SampledFrom([]string{"x", "y"})
		rt.Repeat(map[string]func(*rapid.T){
			"claim": func(rt *rapid.T) {
				id, o, fp := msg.Draw(rt, "msg"), owner.Draw(rt, "owner"), fpOf(content.Draw(rt, "content"))
				lease := rapid.SampledFrom([]time.Duration{time.Minute, 10 * time.Minute}).Draw(rt, "lease")
				s := r[rapid.IntRange(0, 1).Draw(rt, "replica")]
				got, err := s.Claim(ctx, ch, id, fp, o, lease)
				if err != nil {
					rt.Fatalf("Claim: %v", err)
				}
				m, now := models[id], clock.Now()
				take := func() { m.claimed, m.owner, m.until, m.claimFP = true, o, now.Add(lease), fp }
				switch {
				case m.done && now.Before(m.recorded.Add(ttl)):
					want(rt, got, imv2.Claim{State: imv2.ClaimCompleted, Fingerprint: m.doneFP})
				case !m.claimed:
					want(rt, got, imv2.Claim{State: imv2.ClaimAcquired})
					take()
				case now.Before(m.until) && m.owner != o:
					want(rt, got, imv2.Claim{State: imv2.ClaimHeld, Owner: m.owner, Until: m.until})
				case !now.Before(m.until.Add(ttl)) && got.State == imv2.ClaimAcquired:
					take() // a Record may have swept the orphan a TTL after its lease
				default:
					want(rt, got, imv2.Claim{State: imv2.ClaimOrphaned, Owner: m.owner, Fingerprint: m.claimFP})
					keep := m.claimFP
					take()
					m.claimFP = keep // a takeover changes owner and lease only
				}
			},
			"release": func(rt *rapid.T) {
				id, o := msg.Draw(rt, "msg"), owner.Draw(rt, "owner")
				if err := r[rapid.IntRange(0, 1).Draw(rt, "replica")].Release(ctx, ch, id, o); err != nil {
					rt.Fatalf("Release: %v", err)
				}
				if m := models[id]; m.claimed && m.owner == o {
					m.claimed = false
				}
			},
			"record": func(rt *rapid.T) {
				id, fp := msg.Draw(rt, "msg"), fpOf(content.Draw(rt, "content"))
				if err := r[rapid.IntRange(0, 1).Draw(rt, "replica")].Record(ctx, ch, id, fp); err != nil {
					rt.Fatalf("Record: %v", err)
				}
				m := models[id]
				m.done, m.doneFP, m.recorded, m.claimed = true, fp, clock.Now(), false
			},
			"advance": func(rt *rapid.T) {
				clock.Advance(rapid.SampledFrom([]time.Duration{30 * time.Second, 5 * time.Minute, time.Hour}).Draw(rt, "by"))
			},
		})
	})
}

func want(rt *rapid.T, got, w imv2.Claim) {
	rt.Helper()
	if got.State != w.State || got.Owner != w.Owner || got.Fingerprint != w.Fingerprint || !got.Until.Equal(w.Until) {
		rt.Fatalf("Claim = %+v, want %+v", got, w)
	}
}
