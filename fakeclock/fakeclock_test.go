package fakeclock_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xagentkit/imv2/fakeclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestBlockUntil_ReturnsOnceTimersAreArmed: BlockUntil waits for the
// timers another goroutine arms, counting only live ones, and returns at
// once when they are already there.
func TestBlockUntil_ReturnsOnceTimersAreArmed(t *testing.T) {
	c := fakeclock.New(t0)
	if err := c.BlockUntil(t.Context(), 0); err != nil {
		t.Fatalf("BlockUntil(0) = %v", err)
	}
	stopped := c.AfterFunc(time.Second, func() {})
	stopped.Stop() // a stopped timer is not pending
	fired := make(chan struct{})
	go func() {
		c.AfterFunc(time.Second, func() { close(fired) })
		c.AfterFunc(2*time.Second, func() {})
	}()
	if err := c.BlockUntil(t.Context(), 2); err != nil {
		t.Fatalf("BlockUntil(2) = %v", err)
	}
	if n := c.Pending(); n != 2 {
		t.Fatalf("returned with %d pending, want 2", n)
	}
	c.Advance(time.Second)
	<-fired
	if err := c.BlockUntil(t.Context(), 1); err != nil {
		t.Fatalf("BlockUntil(1) after a fire = %v", err)
	}
}

// TestBlockUntil_EndsWithItsContext: with too few timers BlockUntil
// returns the context's error, and a fired timer does not count.
func TestBlockUntil_EndsWithItsContext(t *testing.T) {
	c := fakeclock.New(t0)
	c.AfterFunc(time.Second, func() {})
	c.Advance(time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	go cancel()
	if err := c.BlockUntil(ctx, 1); err != context.Canceled {
		t.Fatalf("BlockUntil with only a fired timer = %v, want context.Canceled", err)
	}
}
