package connector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/promtext"
	"github.com/xagentkit/imv2/state"
)

// viewRest is a Store's parts besides the completed one, which the
// Stores below add with every mix of claim capabilities.
type viewRest struct {
	imv2.PendingStore
	state.ChannelRegistry
	*state.MemoryBindingStore
}

type renewRec struct {
	n   int
	err error
}

func (r *renewRec) RenewClaim(context.Context, string, string, string, time.Duration) (bool, error) {
	r.n++
	return r.err == nil, r.err
}

type beginRec struct {
	n   int
	err error
}

func (r *beginRec) Begin(context.Context, string, string, string) error {
	r.n++
	return r.err
}

// TestCountedStore_S8_ViewKeepsExactlyTheStoresClaimCapabilities: the
// Channels' view of the Store is a ClaimStore, ClaimRenewer or
// ClaimStarter exactly when the Store is one (the Channel finds them by
// type assertion: a hidden Begin makes every orphan's outcome unknown, a
// hidden RenewClaim lets a slow post's claim lapse), and forwards
// RenewClaim and Begin, counting their errors.
func TestCountedStore_S8_ViewKeepsExactlyTheStoresClaimCapabilities(t *testing.T) {
	boom := errors.New("store down")
	mem := func() imv2.ClaimStarter { return imv2.NewMemoryCompletedStore(0, 0, nil) }
	renew, begin := &renewRec{err: boom}, &beginRec{err: boom}
	bothRenew, bothBegin := &renewRec{err: boom}, &beginRec{err: boom}
	rest := func() viewRest {
		return viewRest{imv2.NewMemoryPendingStore(0), state.NewMemoryRegistry(0), state.NewMemoryBindingStore(0)}
	}
	for name, store := range map[string]state.Store{
		"completed": struct {
			viewRest
			imv2.CompletedStore
		}{rest(), mem()},
		"claims": struct {
			viewRest
			imv2.ClaimStore
		}{rest(), mem()},
		"renew": struct {
			viewRest
			imv2.ClaimStore
			*renewRec
		}{rest(), mem(), renew},
		"begin": struct {
			viewRest
			imv2.ClaimStore
			*beginRec
		}{rest(), mem(), begin},
		"both": struct {
			viewRest
			imv2.ClaimStore
			*renewRec
			*beginRec
		}{rest(), mem(), bothRenew, bothBegin},
	} {
		t.Run(name, func(t *testing.T) {
			clk := fakeclock.New(time.Unix(1e9, 0))
			km := newKitMetrics(clk, func() int { return 0 })
			v := newCountedStore(store, km, clk).completed()
			_, claims := store.(imv2.ClaimStore)
			_, renews := store.(imv2.ClaimRenewer)
			_, starts := store.(imv2.ClaimStarter)
			if _, ok := v.(imv2.ClaimStore); ok != claims {
				t.Errorf("view is a ClaimStore: %v, the Store: %v", ok, claims)
			}
			if _, ok := v.(imv2.ClaimRenewer); ok != renews {
				t.Errorf("view is a ClaimRenewer: %v, the Store: %v", ok, renews)
			}
			if _, ok := v.(imv2.ClaimStarter); ok != starts {
				t.Errorf("view is a ClaimStarter: %v, the Store: %v", ok, starts)
			}
			ctx := context.Background()
			var wantRenew, wantBegin float64
			if r, ok := v.(imv2.ClaimRenewer); ok {
				if _, err := r.RenewClaim(ctx, "ch", "m", "me", time.Minute); err != boom {
					t.Errorf("RenewClaim: %v, want the store's error", err)
				}
				wantRenew = 1
			}
			if s, ok := v.(imv2.ClaimStarter); ok {
				if err := s.Begin(ctx, "ch", "m", "me"); err != boom {
					t.Errorf("Begin: %v, want the store's error", err)
				}
				wantBegin = 1
			}
			series, err := promtext.Parse(km.reg.Write())
			if err != nil {
				t.Fatal(err)
			}
			if got := series[`imv2_store_errors_total{store="completed",op="renew_claim"}`]; got != wantRenew {
				t.Errorf("renew_claim errors counted %v, want %v", got, wantRenew)
			}
			if got := series[`imv2_store_errors_total{store="completed",op="begin"}`]; got != wantBegin {
				t.Errorf("begin errors counted %v, want %v", got, wantBegin)
			}
		})
	}
	for name, n := range map[string]int{"renew": renew.n, "begin": begin.n, "both's renew": bothRenew.n, "both's begin": bothBegin.n} {
		if n != 1 {
			t.Errorf("%s: the store's method called %d times through the view, want 1", name, n)
		}
	}
}
