package connector

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
)

// paced runs pc.do in the background and counts the calls of f, which
// fails with the errors of fail in turn and then succeeds.
type paced struct {
	calls atomic.Int32
	done  chan error
}

func runPaced(ctx context.Context, pc *pacer, key string, fail ...error) *paced {
	p := &paced{done: make(chan error, 1)}
	go func() {
		p.done <- pc.do(ctx, key, false, func(context.Context) error {
			n := int(p.calls.Add(1))
			if n <= len(fail) {
				return fail[n-1]
			}
			return nil
		})
	}()
	return p
}

// waitTimer blocks until the pacer armed a timer on clock.
func waitTimer(t *testing.T, clock *fakeclock.Clock) {
	t.Helper()
	if err := clock.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal("no timer armed")
	}
}

func newTestPacer(t *testing.T, p Pace) (*pacer, *fakeclock.Clock) {
	clk := fakeclock.New(time.Unix(1_790_000_000, 0))
	pc, err := newPacer(p, clk)
	if err != nil {
		t.Fatal(err)
	}
	return pc, clk
}

func TestPace_A8_RetryAfterIsHonoured(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{})
	p := runPaced(t.Context(), pc, "room", imv2.RetryAfter(errors.New("429"), time.Second))
	waitTimer(t, clock)
	clock.Advance(999 * time.Millisecond)
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("called %d times before the Retry-After was over; want 1", n)
	}
	clock.Advance(time.Millisecond)
	if err := <-p.done; err != nil {
		t.Fatalf("do = %v; want the retry to succeed", err)
	}
	if n := p.calls.Load(); n != 2 {
		t.Fatalf("called %d times; want 2", n)
	}
}

func TestPace_A8_RetryAfterHoldsTheConversation(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{})
	pc.block("room", time.Second)
	p := runPaced(t.Context(), pc, "room")
	other := runPaced(t.Context(), pc, "another room")
	if err := <-other.done; err != nil {
		t.Fatal(err)
	}
	waitTimer(t, clock)
	if n := p.calls.Load(); n != 0 {
		t.Fatal("a call to a conversation under Retry-After was made at once")
	}
	clock.Advance(time.Second)
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
}

func TestPace_A8_TransientErrorsBackOff(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{Backoff: 100 * time.Millisecond})
	boom := errors.New("connection reset")
	p := runPaced(t.Context(), pc, "room", boom, boom)
	waitTimer(t, clock)
	clock.Advance(99 * time.Millisecond)
	if p.calls.Load() != 1 {
		t.Fatal("retried before the first backoff")
	}
	clock.Advance(time.Millisecond)
	waitTimer(t, clock)
	clock.Advance(199 * time.Millisecond) // the second backoff doubles
	if p.calls.Load() != 2 {
		t.Fatalf("called %d times; want 2 before the doubled backoff", p.calls.Load())
	}
	clock.Advance(time.Millisecond)
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
}

func TestPace_A8_PermanentIsNotRetried(t *testing.T) {
	pc, _ := newTestPacer(t, Pace{})
	p := runPaced(t.Context(), pc, "room", imv2.Refused(errors.New("chat not found")))
	err := <-p.done
	if err == nil || imv2.SafeToRetry(err) || p.calls.Load() != 1 {
		t.Fatalf("do = %v after %d calls; want the permanent error after 1", err, p.calls.Load())
	}
}

// The retry budget is the call's deadline: a Retry-After longer than what
// is left is not waited for; the error is retryable, so xAgent resends.
func TestPace_A8_BudgetSpentIsRetryable(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{})
	ctx := deadlineOn{t.Context(), clock.Now().Add(time.Minute)}
	p := runPaced(ctx, pc, "room", imv2.RetryAfter(errors.New("429"), time.Hour))
	err := <-p.done
	if !imv2.SafeToRetry(err) || p.calls.Load() != 1 {
		t.Fatalf("do = %v after %d calls; want a retryable error at once", err, p.calls.Load())
	}
	// The conversation stays held: the next call does not even try.
	q := runPaced(ctx, pc, "room")
	if err := <-q.done; !errors.Is(err, errBudget) || q.calls.Load() != 0 {
		t.Fatalf("next do = %v after %d calls; want errBudget without a call", err, q.calls.Load())
	}
}

// deadlineOn is a context whose deadline is on a fake clock, as the
// Channel's Target timeout is: the pacer reads it against its own clock.
type deadlineOn struct {
	context.Context
	at time.Time
}

func (d deadlineOn) Deadline() (time.Time, bool) { return d.at, true }

func TestPace_A8_AttemptsBounded(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{MaxAttempts: 2, Backoff: time.Millisecond})
	boom := errors.New("busy")
	p := runPaced(t.Context(), pc, "room", boom, boom, boom)
	waitTimer(t, clock)
	clock.Advance(time.Millisecond)
	if err := <-p.done; !errors.Is(err, boom) || !imv2.SafeToRetry(err) || p.calls.Load() != 2 {
		t.Fatalf("do = %v after %d calls; want the retryable error after 2", err, p.calls.Load())
	}
}

func TestPace_RateLimitsPerConversationAndPlatform(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{PerConversation: 1, PerPlatform: 10})
	if err := <-runPaced(t.Context(), pc, "a").done; err != nil {
		t.Fatal(err)
	}
	p := runPaced(t.Context(), pc, "a") // the conversation's bucket is empty for 1 s
	waitTimer(t, clock)
	clock.Advance(999 * time.Millisecond)
	if p.calls.Load() != 0 {
		t.Fatal("the conversation was called again before its rate allowed")
	}
	clock.Advance(time.Millisecond)
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
	if err := <-runPaced(t.Context(), pc, "b").done; err != nil { // another conversation: at once
		t.Fatal(err)
	}
	q := runPaced(t.Context(), pc, "c") // a third, but the platform bucket was just used
	waitTimer(t, clock)
	clock.Advance(99 * time.Millisecond)
	if q.calls.Load() != 0 {
		t.Fatal("the platform was called again before its rate allowed")
	}
	clock.Advance(time.Millisecond)
	if err := <-q.done; err != nil {
		t.Fatal(err)
	}
}

func TestPace_NegativeRefused(t *testing.T) {
	for _, p := range []Pace{{MaxAttempts: -1}, {ConversationBurst: -1}, {PlatformBurst: -1}} {
		if _, err := newPacer(p, clock.System{}); err == nil {
			t.Fatalf("a negative Pace was accepted: %+v", p)
		}
	}
}

// TestPace_A8_RetryAfterOutlivesLimiterEviction: past MaxConversations the
// LRU evicts a conversation's limiter, but its running Retry-After still
// holds its calls.
func TestPace_A8_RetryAfterOutlivesLimiterEviction(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{MaxConversations: 2})
	pc.block("a", time.Second)
	pc.conv("b")
	pc.conv("c") // evicts a's limiter
	p := runPaced(t.Context(), pc, "a")
	armed := make(chan error, 1)
	go func() { armed <- clock.BlockUntil(t.Context(), 1) }()
	select {
	case <-armed: // the call waits on the Retry-After's timer
	case <-p.done:
		t.Fatal("a conversation under Retry-After was called at once after its limiter was evicted")
	}
	clock.Advance(999 * time.Millisecond)
	if p.calls.Load() != 0 {
		t.Fatal("called before the Retry-After was over")
	}
	clock.Advance(time.Millisecond)
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
}

// TestPace_RetryAfterDeadlinesBounded: at most MaxConversations running
// Retry-Afters are kept; the one ending first gives way.
func TestPace_RetryAfterDeadlinesBounded(t *testing.T) {
	pc, clock := newTestPacer(t, Pace{MaxConversations: 2})
	pc.block("a", time.Second)
	pc.block("b", 2*time.Second)
	pc.block("c", 3*time.Second)
	if n := len(pc.until); n != 2 {
		t.Fatalf("%d deadlines kept; want 2", n)
	}
	if d := pc.blocked("a", clock.Now()); d != 0 {
		t.Fatalf("a still held %v; want it dropped first", d)
	}
	if d := pc.blocked("b", clock.Now()); d != 2*time.Second {
		t.Fatalf("b held %v; want 2s", d)
	}
}
