package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/metrics"
)

// TestCollector_CodeLabelsBounded: codes come from the peer; beyond the
// SDK's own codes and MaxExtraCodes others, and for malformed ones, the
// label is "other", so a hostile peer cannot grow the series without
// bound.
func TestCollector_CodeLabelsBounded(t *testing.T) {
	m := metrics.New()
	for i := range metrics.MaxExtraCodes + 10 {
		m.Observe(imv2.Event{Kind: imv2.EventDeltaRejected, Code: imv2.Code(fmt.Sprintf("peer_code_%d", i))})
	}
	m.Observe(imv2.Event{Kind: imv2.EventDeltaRejected, Code: imv2.Code(strings.Repeat("x", 65))})
	m.Observe(imv2.Event{Kind: imv2.EventDeltaRejected, Code: "Bad Code"})
	m.Observe(imv2.Event{Kind: imv2.EventDeltaRejected, Code: imv2.CodeDeltaSequenceGap}) // the SDK's own, past the cap
	m.Observe(imv2.Event{Kind: imv2.EventAcked, Status: "weird", Attempt: 1})
	s := scrapeHandler(t, m)
	series := 0
	for k := range s {
		if strings.HasPrefix(k, "imv2_deltas_rejected_total{") {
			series++
		}
	}
	if want := metrics.MaxExtraCodes + 2; series != want { // extra codes, "other", delta_sequence_gap
		t.Fatalf("%d delta code series, want %d", series, want)
	}
	for k, want := range map[string]float64{
		`imv2_deltas_rejected_total{code="other"}`:              12,
		`imv2_deltas_rejected_total{code="delta_sequence_gap"}`: 1,
		`imv2_deltas_rejected_total{code="peer_code_0"}`:        1,
		`imv2_acks_received_total{code="",status="other"}`:      1,
	} {
		if s[k] != want {
			t.Errorf("%s = %v, want %v", k, s[k], want)
		}
	}
}

// TestCollector_CompletedKeepsClaimStore: wrapping a ClaimStore keeps the
// capability the Channel looks for; wrapping a plain CompletedStore does
// not invent it.
func TestCollector_CompletedKeepsClaimStore(t *testing.T) {
	m := metrics.New()
	if _, ok := m.Completed(plainCompleted{imv2.NewMemoryCompletedStore(0, 0, nil)}).(imv2.ClaimStore); ok {
		t.Fatal("a plain CompletedStore became a ClaimStore")
	}
	if _, ok := m.Completed(imv2.NewMemoryCompletedStore(0, 0, nil)).(imv2.ClaimStore); !ok {
		t.Fatal("the wrapper hides ClaimStore")
	}
	if _, ok := m.Completed(imv2.NewMemoryCompletedStore(0, 0, nil)).(imv2.ClaimRenewer); ok {
		t.Fatal("a ClaimStore that does not renew became a ClaimRenewer")
	}
	r := renewer{imv2.NewMemoryCompletedStore(0, 0, nil)}
	w, ok := m.Completed(r).(imv2.ClaimRenewer)
	if !ok {
		t.Fatal("the wrapper hides ClaimRenewer: the Channel would stop renewing its claims")
	}
	if held, err := w.RenewClaim(context.Background(), "ch", "m", "o", time.Second); err == nil || held {
		t.Fatalf("RenewClaim = %v, %v; want the store's error passed through", held, err)
	}
}

// renewer is a ClaimStore whose RenewClaim fails.
type renewer struct{ imv2.ClaimStore }

func (renewer) RenewClaim(context.Context, string, string, string, time.Duration) (bool, error) {
	return false, errors.New("database away")
}

// plainCompleted hides every method of a store but CompletedStore's.
type plainCompleted struct{ imv2.CompletedStore }

func scrapeHandler(t *testing.T, m *metrics.Collector) map[string]float64 {
	t.Helper()
	s := httptest.NewServer(m.Handler())
	defer s.Close()
	defer http.DefaultClient.CloseIdleConnections()
	return scrape(t, s.URL)
}
