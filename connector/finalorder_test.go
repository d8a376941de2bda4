package connector

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

func newTestOrder(t *testing.T, p Pace) (*finalOrder, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(time.Unix(1_790_000_000, 0))
	pc, err := newPacer(p, clk)
	if err != nil {
		t.Fatal(err)
	}
	return newFinalOrder(pc.p, clk), clk
}

var errAgain = imv2.NotPosted(errors.New("budget spent"))

func busy(err error) bool {
	var e *imv2.Error
	return errors.As(err, &e) && e.Code == imv2.CodeChannelBusy && e.Retryable
}

// TestFinalOrder_A8_LaterFinalsWaitInArrivalOrder: behind an unresolved
// final, later ones are busy; once it is shown the first of them is next,
// and a later one resent before it stays busy.
func TestFinalOrder_A8_LaterFinalsWaitInArrivalOrder(t *testing.T) {
	fo, _ := newTestOrder(t, Pace{})
	if _, err := fo.admit("ch", "A"); err != nil {
		t.Fatal(err)
	}
	fo.settle("ch", "A", errAgain, false)
	for _, id := range []string{"B", "C"} {
		if _, err := fo.admit("ch", id); !busy(err) {
			t.Fatalf("%s behind unresolved A: %v; want channel_busy", id, err)
		}
	}
	if _, err := fo.admit("other", "X"); err != nil {
		t.Fatalf("another channel is held: %v", err)
	}
	if _, err := fo.admit("ch", "A"); err != nil {
		t.Fatalf("the resend of A: %v", err)
	}
	fo.settle("ch", "A", nil, false)
	if _, err := fo.admit("ch", "C"); !busy(err) {
		t.Fatalf("C before B: %v; want channel_busy", err)
	}
	if _, err := fo.admit("ch", "B"); err != nil {
		t.Fatalf("B after A: %v", err)
	}
	fo.settle("ch", "B", imv2.Refused(errors.New("refused")), false)
	if _, err := fo.admit("ch", "C"); err != nil {
		t.Fatalf("C after B was refused for good: %v", err)
	}
	fo.settle("ch", "C", nil, false)
	if n := fo.chans.Len(); n != 0 {
		t.Fatalf("%d channels held after every final resolved; want 0", n)
	}
}

// TestFinalOrder_A8_HoldEndsAfterTTL: a final not resent for OrderTTL
// stops holding its channel.
func TestFinalOrder_A8_HoldEndsAfterTTL(t *testing.T) {
	fo, clock := newTestOrder(t, Pace{})
	fo.settle("ch", "A", errAgain, false)
	clock.Advance(DefaultOrderTTL - time.Millisecond)
	if _, err := fo.admit("ch", "B"); !busy(err) {
		t.Fatalf("B within the TTL: %v; want channel_busy", err)
	}
	clock.Advance(time.Millisecond)
	if _, err := fo.admit("ch", "B"); err != nil {
		t.Fatalf("B after A's TTL: %v; want it next", err)
	}
	if _, err := fo.admit("ch", "C"); !busy(err) {
		t.Fatalf("C behind B, queued but not yet shown: %v; want channel_busy", err)
	}
	clock.Advance(DefaultOrderTTL)
	if _, err := fo.admit("ch", "C"); err != nil {
		t.Fatalf("C after every hold's TTL: %v", err)
	}
}

// TestFinalOrder_HoldsAreBounded: at most maxOrderQueue finals queue per
// channel and MaxOrderChannels channels hold one.
func TestFinalOrder_HoldsAreBounded(t *testing.T) {
	fo, _ := newTestOrder(t, Pace{MaxOrderChannels: 3})
	fo.settle("ch", "A", errAgain, false)
	for i := range 2 * maxOrderQueue {
		if _, err := fo.admit("ch", fmt.Sprint("m", i)); !busy(err) {
			t.Fatal(err)
		}
	}
	if q, _ := fo.chans.Peek("ch"); len(q) != maxOrderQueue {
		t.Fatalf("%d finals queued; want %d", len(q), maxOrderQueue)
	}
	for i := range 10 {
		fo.settle(fmt.Sprint("ch", i), "A", errAgain, false)
	}
	if n := fo.chans.Len(); n != 3 {
		t.Fatalf("%d channels held; want 3", n)
	}
}
