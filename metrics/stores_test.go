package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/metrics"
)

// The optional capabilities of a completed store, one type per mix.
type (
	onlyCompleted struct{ imv2.CompletedStore }
	onlyClaims    struct{ imv2.ClaimStore }
	claimsRenew   struct {
		imv2.ClaimStore
		*renewRec
	}
	claimsBegin struct {
		imv2.ClaimStore
		*beginRec
	}
	claimsBoth struct {
		imv2.ClaimStore
		*renewRec
		*beginRec
	}
)

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

// TestCompleted_S8_KeepsExactlyTheStoresCapabilities: the wrapper is a
// ClaimStore, ClaimRenewer or ClaimStarter exactly when the store it wraps
// is one (the Channel finds them by type assertion: a hidden Begin makes
// every orphan's outcome unknown, an invented one would be believed), and
// it forwards RenewClaim and Begin, counting their errors.
func TestCompleted_S8_KeepsExactlyTheStoresCapabilities(t *testing.T) {
	boom := errors.New("store down")
	for name, inner := range map[string]imv2.CompletedStore{
		"completed": onlyCompleted{imv2.NewMemoryCompletedStore(0, 0, nil)},
		"claims":    onlyClaims{imv2.NewMemoryCompletedStore(0, 0, nil)},
		"renew":     claimsRenew{imv2.NewMemoryCompletedStore(0, 0, nil), &renewRec{err: boom}},
		"begin":     claimsBegin{imv2.NewMemoryCompletedStore(0, 0, nil), &beginRec{err: boom}},
		"both":      claimsBoth{imv2.NewMemoryCompletedStore(0, 0, nil), &renewRec{err: boom}, &beginRec{err: boom}},
		"memory":    imv2.NewMemoryCompletedStore(0, 0, nil), // a ClaimStarter
	} {
		t.Run(name, func(t *testing.T) {
			c := metrics.New()
			w := c.Completed(inner)
			_, claims := inner.(imv2.ClaimStore)
			_, renews := inner.(imv2.ClaimRenewer)
			_, starts := inner.(imv2.ClaimStarter)
			if _, ok := w.(imv2.ClaimStore); ok != claims {
				t.Errorf("wrapper is a ClaimStore: %v, the store: %v", ok, claims)
			}
			if _, ok := w.(imv2.ClaimRenewer); ok != renews {
				t.Errorf("wrapper is a ClaimRenewer: %v, the store: %v", ok, renews)
			}
			if _, ok := w.(imv2.ClaimStarter); ok != starts {
				t.Errorf("wrapper is a ClaimStarter: %v, the store: %v", ok, starts)
			}
			ctx := context.Background()
			want := ""
			// The recorders fail; the memory store's Begin of no claim
			// succeeds and counts nothing.
			if r, ok := w.(imv2.ClaimRenewer); ok {
				if _, err := r.RenewClaim(ctx, "ch", "m", "me", time.Minute); err != boom {
					t.Errorf("RenewClaim: %v, want the store's error", err)
				}
				want += "imv2_store_errors_total{op=\"renew_claim\",store=\"completed\"} 1\n"
			}
			if s, ok := w.(imv2.ClaimStarter); ok {
				err := s.Begin(ctx, "ch", "m", "me")
				switch {
				case name == "memory" && err != nil:
					t.Errorf("Begin: %v", err)
				case name != "memory" && err != boom:
					t.Errorf("Begin: %v, want the store's error", err)
				case name != "memory":
					want += "imv2_store_errors_total{op=\"begin\",store=\"completed\"} 1\n"
				}
			}
			switch r := inner.(type) {
			case claimsRenew:
				wantCalls(t, "RenewClaim", r.renewRec.n)
			case claimsBegin:
				wantCalls(t, "Begin", r.beginRec.n)
			case claimsBoth:
				wantCalls(t, "RenewClaim", r.renewRec.n)
				wantCalls(t, "Begin", r.beginRec.n)
			}
			if want != "" {
				want = "# HELP imv2_store_errors_total Errors of the pending and completed stores, by store and operation.\n# TYPE imv2_store_errors_total counter\n" + want
			}
			if err := testutil.CollectAndCompare(c, strings.NewReader(want), "imv2_store_errors_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

func wantCalls(t *testing.T, method string, n int) {
	t.Helper()
	if n != 1 {
		t.Errorf("the store's %s called %d times through the wrapper, want 1", method, n)
	}
}
