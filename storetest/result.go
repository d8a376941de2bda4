package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/connid"
	"github.com/xagentkit/imv2/state"
)

// ResultFactory returns a new, empty ResultStore of at most capacity
// records, kept for ttl, timed by clock. It registers its own cleanup.
type ResultFactory func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) state.ResultStore

// ResultReopener closes s and returns a store on the same data, as after
// a process restart (or a crash).
type ResultReopener func(t *testing.T, s state.ResultStore) state.ResultStore

// TestResultStore runs the ResultStore contract (W13: a tool call's
// result kept with its record) against stores made by newStore; reopen
// may be nil for a store that is not durable. A result comes back byte
// for byte, goes with its record (TTL, DropChannel, a Record without
// one, eviction), follows a Handover, is refused over
// state.MaxResultBytes, survives a reopen, and is evicted by no other
// connector_id's flood while its record is in its share.
func TestResultStore(t *testing.T, newStore ResultFactory, reopen ResultReopener) {
	t.Run("W13_KeptWithItsRecord", func(t *testing.T) { resultKept(t, newStore) })
	t.Run("W13_GoesWithItsRecord", func(t *testing.T) { resultGoes(t, newStore) })
	t.Run("W13_OverTheBoundRefused", func(t *testing.T) { resultBound(t, newStore) })
	t.Run("W13_HandoverCopiesIt", func(t *testing.T) { resultHandover(t, newStore) })
	t.Run("W13_AnotherPeersFloodKeepsIt", func(t *testing.T) { resultFlood(t, newStore) })
	if reopen != nil {
		t.Run("W13_SurvivesReopen", func(t *testing.T) { resultReopen(t, newStore, reopen) })
	}
}

var resultEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func wantResult(t *testing.T, s state.ResultStore, ch, id string, fp imv2.Fingerprint, want []byte) {
	t.Helper()
	got, res, ok, err := s.LookupResult(context.Background(), ch, id)
	switch {
	case err != nil:
		t.Fatalf("LookupResult(%s, %s): %v", ch, id, err)
	case want == nil && ok && res != nil:
		t.Fatalf("LookupResult(%s, %s) = %q; want none", ch, id, res)
	case want != nil && (!ok || got != fp || !bytes.Equal(res, want)):
		t.Fatalf("LookupResult(%s, %s) = %x, %q, %v; want %x, %q", ch, id, got[:4], res, ok, fp[:4], want)
	}
}

func mustResult(t *testing.T, ctx context.Context, s state.ResultStore, ch, id string, fp imv2.Fingerprint, res []byte) {
	t.Helper()
	if err := s.RecordResult(ctx, ch, id, fp, res); err != nil {
		t.Fatalf("RecordResult(%s, %s): %v", ch, id, err)
	}
}

func resultKept(t *testing.T, newStore ResultFactory) {
	s := newStore(t, 100, time.Hour, fakeclock.New(resultEpoch))
	ctx := context.Background()
	res := []byte(`{"status":"sent","id":"m_1"}`)
	mustResult(t, ctx, s, "ch_1", "t_1", imv2.Fingerprint{1, 1}, res)
	res[0] = 'x' // the store keeps its own copy
	wantResult(t, s, "ch_1", "t_1", imv2.Fingerprint{1, 1}, []byte(`{"status":"sent","id":"m_1"}`))
	if fp, ok, err := s.Lookup(ctx, "ch_1", "t_1"); err != nil || !ok || fp != (imv2.Fingerprint{1, 1}) {
		t.Fatalf("Lookup of a record with a result = %x, %v, %v", fp[:2], ok, err)
	}
	full := bytes.Repeat([]byte{0xff, 0}, state.MaxResultBytes/2) // any bytes, the bound exactly
	mustResult(t, ctx, s, "ch_1", "t_full", imv2.Fingerprint{2}, full)
	wantResult(t, s, "ch_1", "t_full", imv2.Fingerprint{2}, full)
	mustResult(t, ctx, s, "ch_1", "t_empty", imv2.Fingerprint{3}, []byte{})
	if _, r, ok, err := s.LookupResult(ctx, "ch_1", "t_empty"); err != nil || !ok || len(r) != 0 {
		t.Fatalf("an empty result: %q, %v, %v", r, ok, err)
	}
	if err := s.Record(ctx, "ch_1", "plain", imv2.Fingerprint{4}); err != nil {
		t.Fatal(err)
	}
	if fp, r, ok, err := s.LookupResult(ctx, "ch_1", "plain"); err != nil || !ok || r != nil || fp != (imv2.Fingerprint{4}) {
		t.Fatalf("a record without a result: %x, %q, %v, %v", fp[:1], r, ok, err)
	}
	if _, _, ok, err := s.LookupResult(ctx, "ch_1", "none"); err != nil || ok {
		t.Fatalf("no record: %v, %v", ok, err)
	}
}

func resultGoes(t *testing.T, newStore ResultFactory) {
	clk := fakeclock.New(resultEpoch)
	s := newStore(t, 100, time.Hour, clk)
	ctx := context.Background()
	mustResult(t, ctx, s, "ch_1", "again", imv2.Fingerprint{1}, []byte("r1"))
	if err := s.Record(ctx, "ch_1", "again", imv2.Fingerprint{1}); err != nil {
		t.Fatal(err)
	}
	wantResult(t, s, "ch_1", "again", imv2.Fingerprint{1}, nil)
	if _, r, _, _ := s.LookupResult(ctx, "ch_1", "again"); r != nil {
		t.Fatalf("a Record without a result kept the old one: %q", r)
	}

	mustResult(t, ctx, s, "ch_drop", "t", imv2.Fingerprint{1}, []byte("r"))
	if err := s.DropChannel(ctx, "ch_drop"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := s.LookupResult(ctx, "ch_drop", "t"); err != nil || ok {
		t.Fatalf("after DropChannel: %v, %v", ok, err)
	}

	mustResult(t, ctx, s, "ch_old", "t", imv2.Fingerprint{1}, []byte("r"))
	clk.Advance(time.Hour)
	if _, _, ok, err := s.LookupResult(ctx, "ch_old", "t"); err != nil || ok {
		t.Fatalf("after its TTL: %v, %v", ok, err)
	}
	// A record made again after its TTL has no result until one is given.
	if err := s.Record(ctx, "ch_old", "t", imv2.Fingerprint{1}); err != nil {
		t.Fatal(err)
	}
	if _, r, ok, err := s.LookupResult(ctx, "ch_old", "t"); err != nil || !ok || r != nil {
		t.Fatalf("a new record after the TTL: %q, %v, %v", r, ok, err)
	}
}

func resultBound(t *testing.T, newStore ResultFactory) {
	s := newStore(t, 100, time.Hour, fakeclock.New(resultEpoch))
	ctx := context.Background()
	err := s.RecordResult(ctx, "ch_1", "big", imv2.Fingerprint{1}, make([]byte, state.MaxResultBytes+1))
	if !errors.Is(err, &imv2.Error{Code: imv2.CodeInvalidPacket}) {
		t.Fatalf("a result over MaxResultBytes: %v; want invalid_packet", err)
	}
	if _, ok, err := s.Lookup(ctx, "ch_1", "big"); err != nil || ok {
		t.Fatalf("a refused result left a record: %v, %v", ok, err)
	}
}

func resultHandover(t *testing.T, newStore ResultFactory) {
	s := newStore(t, 100, time.Hour, fakeclock.New(resultEpoch))
	ctx := context.Background()
	mustResult(t, ctx, s, "ch_old", "t", imv2.Fingerprint{1}, []byte("kept"))
	if err := s.Handover(ctx, "ch_old", "ch_new"); err != nil {
		t.Fatal(err)
	}
	wantResult(t, s, "ch_new", "t", imv2.Fingerprint{1}, []byte("kept"))
	wantResult(t, s, "ch_old", "t", imv2.Fingerprint{1}, []byte("kept"))
}

// resultFlood: a victim connector_id's record with a result, then another
// connector_id's records over many channels, three times the capacity:
// the victim's record is within its share, so it and its result stay.
func resultFlood(t *testing.T, newStore ResultFactory) {
	const capacity = 20
	s := newStore(t, capacity, time.Hour, fakeclock.New(resultEpoch))
	victim := connid.WithConnectorID(context.Background(), "victim")
	attacker := connid.WithConnectorID(context.Background(), "attacker")
	mustResult(t, victim, s, "ch_v", "t", imv2.Fingerprint{1}, []byte("victim's"))
	for i := range 3 * capacity {
		mustResult(t, attacker, s, fmt.Sprintf("ch_a%d", i%7), fmt.Sprintf("t%d", i), imv2.Fingerprint{2}, []byte("flood"))
	}
	wantResult(t, s, "ch_v", "t", imv2.Fingerprint{1}, []byte("victim's"))
}

func resultReopen(t *testing.T, newStore ResultFactory, reopen ResultReopener) {
	s := newStore(t, 100, time.Hour, fakeclock.New(resultEpoch))
	ctx := context.Background()
	res := bytes.Repeat([]byte("ok"), 1000)
	mustResult(t, ctx, s, "ch_1", "t", imv2.Fingerprint{9}, res)
	s = reopen(t, s)
	wantResult(t, s, "ch_1", "t", imv2.Fingerprint{9}, res)
}
