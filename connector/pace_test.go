package connector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
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
	q := runPaced(t.Context(), pc, "b") // another conversation, but the platform was just called
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
	for _, p := range []Pace{{MaxAttempts: -1}, {ConversationBurst: -1}, {PlatformBurst: -1}, {PerConversation: math.NaN()}, {PerPlatform: -1}} {
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

// departures runs pc.do calls of one conversation and records, on the
// pacer's clock, when each call left: after its Turn when turn is set,
// else when the kit let it go.
type departures struct {
	clk  clock.Clock
	turn bool
	mu   sync.Mutex
	left []time.Time
}

func (d *departures) call(ctx context.Context) error {
	if d.turn {
		if err := Turn(ctx); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.left = append(d.left, d.clk.Now())
	return nil
}

// gaps checks that no two departures are closer than min.
func (d *departures) gaps(t *testing.T, n int, min time.Duration) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.left) != n {
		t.Fatalf("%d calls left; want %d", len(d.left), n)
	}
	for i := 1; i < n; i++ {
		if gap := d.left[i].Sub(d.left[i-1]); gap < min {
			t.Fatalf("calls %d and %d left %v apart; want at least %v (left at %v)", i, i+1, gap, min, d.left)
		}
	}
}

// advanceUntil advances clk by step while a timer is armed, until done
// yields: a call whose timer fired reads the clock where it fired.
func advanceUntil(t *testing.T, clk *fakeclock.Clock, step time.Duration, done <-chan error) error {
	t.Helper()
	for {
		ctx, cancel := context.WithCancel(t.Context())
		armed := make(chan error, 1)
		go func() { armed <- clk.BlockUntil(ctx, 1) }()
		select {
		case err := <-done:
			cancel()
			return err
		case err := <-armed:
			cancel()
			if err != nil {
				t.Fatal("neither a call returned nor a timer was armed")
			}
			clk.Advance(step)
		}
	}
}

// TestPace_TurnSpacesFromWhenTheCallLeft: a platform method that does
// something first (the Telegram bridge writes a trace into the binding)
// and calls Turn just before its platform call moves its departure to
// then: the conversation's next call leaves 1/PerConversation after it,
// not after the moment the kit let the first one go.
func TestPace_TurnSpacesFromWhenTheCallLeft(t *testing.T) {
	pc, clk := newTestPacer(t, Pace{PerConversation: 1, PerPlatform: 30})
	d := &departures{clk: clk, turn: true}
	busy, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- pc.do(t.Context(), "chat", true, func(ctx context.Context) error {
			close(busy)
			<-release // a store write the kit cannot see
			return d.call(ctx)
		})
	}()
	<-busy
	clk.Advance(900 * time.Millisecond)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() { second <- pc.do(t.Context(), "chat", true, d.call) }()
	if err := advanceUntil(t, clk, 100*time.Millisecond, second); err != nil {
		t.Fatal(err)
	}
	d.gaps(t, 2, time.Second)
}

// TestPace_TurnsWithinOneCallAreSpaced: each Turn after a method's first
// is a departure of its own (a final sent as several messages).
func TestPace_TurnsWithinOneCallAreSpaced(t *testing.T) {
	pc, clk := newTestPacer(t, Pace{PerConversation: 1})
	d := &departures{clk: clk, turn: true}
	done := make(chan error, 1)
	go func() {
		done <- pc.do(t.Context(), "chat", true, func(ctx context.Context) error {
			for range 3 {
				if err := d.call(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	if err := advanceUntil(t, clk, 100*time.Millisecond, done); err != nil {
		t.Fatal(err)
	}
	d.gaps(t, 3, time.Second)
	if err := Turn(t.Context()); err != nil { // not a kit call's context: no wait
		t.Fatal(err)
	}
}

// pausedClock holds the callbacks of timers that fall due while paused
// and runs them together afterwards, as a process stopped (SIGSTOP, a VM
// paused) and resumed wakes all its late timers at once.
type pausedClock struct {
	*fakeclock.Clock
	mu     sync.Mutex
	paused bool
	held   []func()
}

func (p *pausedClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return p.Clock.AfterFunc(d, func() {
		p.mu.Lock()
		if p.paused {
			p.held = append(p.held, f)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		f()
	})
}

// pause advances the clock by d with every timer held, then fires them.
func (p *pausedClock) pause(d time.Duration) {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	p.Advance(d)
	p.mu.Lock()
	p.paused = false
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, f := range held {
		f()
	}
}

// TestPace_LateTimersDoNotBunchCalls: calls waiting for their turn when
// the process pauses all wake at once on resume; they still leave
// 1/PerConversation apart, measured from the calls that left.
func TestPace_LateTimersDoNotBunchCalls(t *testing.T) {
	clk := &pausedClock{Clock: fakeclock.New(time.Unix(1_790_000_000, 0))}
	pc, err := newPacer(Pace{PerConversation: 1}, clk)
	if err != nil {
		t.Fatal(err)
	}
	d := &departures{clk: clk}
	done := make(chan error, 3)
	if err := pc.do(t.Context(), "chat", false, d.call); err != nil {
		t.Fatal(err)
	}
	go func() { done <- pc.do(t.Context(), "chat", false, d.call) }()
	waitTimer(t, clk.Clock)
	go func() { done <- pc.do(t.Context(), "chat", false, d.call) }()
	clk.pause(5 * time.Second)
	both := make(chan error, 1)
	go func() { both <- errors.Join(<-done, <-done) }()
	if err := advanceUntil(t, clk.Clock, 100*time.Millisecond, both); err != nil {
		t.Fatal(err)
	}
	d.gaps(t, 3, time.Second)
}

// TestPace_ConversationCallsLeaveInTheOrderTheyCame: calls to one
// conversation waiting their turn leave first come first served, each a
// gap after the one before, however their timers fire.
func TestPace_ConversationCallsLeaveInTheOrderTheyCame(t *testing.T) {
	pc, clk := newTestPacer(t, Pace{PerConversation: 1, PerPlatform: 10})
	var mu sync.Mutex
	var order []int
	d := &departures{clk: clk}
	call := func(i int) func(context.Context) error {
		return func(ctx context.Context) error {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return d.call(ctx)
		}
	}
	if err := pc.do(t.Context(), "chat", false, call(0)); err != nil {
		t.Fatal(err)
	}
	const n = 6
	done := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { done <- pc.do(t.Context(), "chat", false, call(i)) }()
		for queued := 0; queued < i; { // in line before the next comes
			pc.mu.Lock()
			queued = len(pc.conv("chat").queue)
			pc.mu.Unlock()
			runtime.Gosched()
		}
	}
	all := make(chan error, 1)
	go func() {
		var errs []error
		for range n {
			errs = append(errs, <-done)
		}
		all <- errors.Join(errs...)
	}()
	if err := advanceUntil(t, clk, 300*time.Millisecond, all); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(order, want) {
		t.Fatalf("calls left in the order %v; want %v", order, want)
	}
	d.gaps(t, n+1, time.Second)
}

// TestPace_TinyRateIsADay: a rate under one call a day waits a day, not
// an overflowed (negative) gap that would let every call through.
func TestPace_TinyRateIsADay(t *testing.T) {
	pc, _ := newTestPacer(t, Pace{PerConversation: 1e-300, ConversationBurst: math.MaxInt})
	for range 2 { // the burst's slack is capped too
		if err := <-runPaced(t.Context(), pc, "chat").done; err != nil {
			t.Fatal(err)
		}
	}
	pc2, clk2 := newTestPacer(t, Pace{PerConversation: 1e-300})
	if err := <-runPaced(t.Context(), pc2, "chat").done; err != nil {
		t.Fatal(err)
	}
	p := runPaced(t.Context(), pc2, "chat")
	armed := make(chan error, 1)
	go func() { armed <- clk2.BlockUntil(t.Context(), 1) }()
	select {
	case <-armed:
	case err := <-p.done:
		t.Fatalf("called again at once (%v); want a day's wait", err)
	}
	clk2.Advance(24*time.Hour - time.Millisecond)
	if p.calls.Load() != 0 {
		t.Fatal("called again before a day passed")
	}
	clk2.Advance(time.Millisecond)
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
}

// countingClock counts the timers armed on it.
type countingClock struct {
	*fakeclock.Clock
	armed atomic.Int64
}

func (c *countingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.armed.Add(1)
	return c.Clock.AfterFunc(d, f)
}

// TestPace_CallsWaitingOnThePlatformWakeOneAtATime: many conversations
// waiting for the platform's rate wait in one line, and only its head
// watches the clock: a departure wakes the next call, not every waiting
// one to find the platform busy again (with n waiting, n timers a turn,
// about n²/2 in all). (The gaps themselves are TestPace_RateLimits…'s:
// here the clock moves while a call that left has yet to read it.)
func TestPace_CallsWaitingOnThePlatformWakeOneAtATime(t *testing.T) {
	clk := &countingClock{Clock: fakeclock.New(time.Unix(1_790_000_000, 0))}
	pc, err := newPacer(Pace{PerPlatform: 10}, clk)
	if err != nil {
		t.Fatal(err)
	}
	d := &departures{clk: clk}
	if err := pc.do(t.Context(), "chat-0", false, d.call); err != nil {
		t.Fatal(err)
	}
	const n = 60
	done := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { done <- pc.do(t.Context(), fmt.Sprintf("chat-%d", i), false, d.call) }()
	}
	// Every call waiting (in the line, or on a timer of its own) before
	// the clock moves.
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		pc.mu.Lock()
		queued := len(pc.all.queue)
		pc.mu.Unlock()
		if queued == n || clk.armed.Load() >= n {
			break
		}
		if time.Now().After(deadline) { // a hang guard
			t.Fatalf("%d calls in the platform's line, %d timers armed; want %d waiting", queued, clk.armed.Load(), n)
		}
	}
	all := make(chan error, 1)
	go func() {
		var errs []error
		for range n {
			errs = append(errs, <-done)
		}
		all <- errors.Join(errs...)
	}()
	if err := advanceUntil(t, clk.Clock, 100*time.Millisecond, all); err != nil {
		t.Fatal(err)
	}
	if d.mu.Lock(); len(d.left) != n+1 {
		t.Fatalf("%d calls left; want %d", len(d.left), n+1)
	}
	d.mu.Unlock()
	if armed := clk.armed.Load(); armed > 2*n {
		t.Fatalf("%d timers armed for %d waiting calls; want at most %d (one line, its head alone on the clock)", armed, n, 2*n)
	}
}
