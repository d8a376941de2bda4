package connector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
)

// Defaults of Pace.
const (
	DefaultMaxAttempts      = 8
	DefaultBackoff          = 250 * time.Millisecond
	DefaultMaxBackoff       = 10 * time.Second
	DefaultMaxConversations = 10_000
)

// Pace is how the kit calls the platform: at most PerConversation calls a
// second to one conversation and PerPlatform to all of them (token buckets
// of golang.org/x/time/rate), every call — final, draft, edit, typing — in
// the order the Channel makes them.
//
// A call that fails retryable (any error not marked imv2.Permanent) is
// tried again by the kit, after the delay a RetryAfter error names or else
// an exponential backoff from Backoff up to MaxBackoff, at most MaxAttempts
// times and only while the call's context (the Channel's Target timeout)
// leaves room for the wait. Meanwhile the channel's later messages wait, so
// order holds within the retry budget: a final is not overtaken while the
// kit still retries it. When the budget is spent the final is rejected
// retryable and xAgent sends it again (A8), but the Channel goes on to the
// next final meanwhile, so a final that outlasts its budget may be shown
// after later ones (A, B, C shown as B, C, A). A platform that must keep
// order under long outages needs a budget (MaxAttempts, MaxBackoff, the
// Target timeout) that covers them.
//
// Zero values take the defaults: no rate limit (rate.Inf), burst 1, 8
// attempts, 250 ms doubling to 10 s. The per-conversation limiters live in
// an LRU of MaxConversations (default 10,000) keys; an evicted key starts
// with a full bucket again.
type Pace struct {
	PerConversation   rate.Limit
	ConversationBurst int
	PerPlatform       rate.Limit
	PlatformBurst     int
	MaxAttempts       int
	Backoff           time.Duration
	MaxBackoff        time.Duration
	MaxConversations  int
}

// RetryAfter wraps err, a platform's rate-limit answer, with the delay the
// platform asked for (HTTP 429 Retry-After, Telegram retry_after). The kit
// waits that long before the next call to the conversation. RetryAfter(nil,
// d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: d}
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.err, e.after)
}
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfterOf returns the delay of a RetryAfter error in err's chain.
func RetryAfterOf(err error) (time.Duration, bool) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}

// pacer applies a Pace on a clock.
type pacer struct {
	p     Pace
	clock clock.Clock
	all   *rate.Limiter
	convs *lru.Cache[string, *convPace]
}

// convPace is one conversation's limiter and the end of its Retry-After.
type convPace struct {
	lim   *rate.Limiter
	mu    sync.Mutex
	until time.Time
}

func newPacer(p Pace, clk clock.Clock) (*pacer, error) {
	if p.PerConversation < 0 || p.PerPlatform < 0 || p.MaxAttempts < 0 || p.Backoff < 0 || p.MaxBackoff < 0 || p.MaxConversations < 0 {
		return nil, errors.New("connector: negative Pace value")
	}
	if p.PerConversation == 0 {
		p.PerConversation = rate.Inf
	}
	if p.PerPlatform == 0 {
		p.PerPlatform = rate.Inf
	}
	p.ConversationBurst = max(p.ConversationBurst, 1)
	p.PlatformBurst = max(p.PlatformBurst, 1)
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Backoff == 0 {
		p.Backoff = DefaultBackoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.MaxConversations == 0 {
		p.MaxConversations = DefaultMaxConversations
	}
	convs, err := lru.New[string, *convPace](p.MaxConversations)
	if err != nil {
		return nil, err
	}
	return &pacer{p: p, clock: clk, all: rate.NewLimiter(p.PerPlatform, p.PlatformBurst), convs: convs}, nil
}

// errBudget says a call was not made: its wait would overrun the budget.
var errBudget = errors.New("connector: platform rate limit: no time left to wait within the Target timeout")

// do calls f for the conversation key under the limits, retrying as Pace
// says. The error is f's last, or errBudget's wrap, marked retryable
// unless f said permanent.
func (pc *pacer) do(ctx context.Context, key string, f func(context.Context) error) error {
	var last error
	for attempt := 1; ; attempt++ {
		if err := pc.wait(ctx, key); err != nil {
			if last != nil {
				return imv2.Retryable(fmt.Errorf("%w (after %d attempts: %v)", err, attempt-1, last))
			}
			return imv2.Retryable(err)
		}
		err := f(ctx)
		if err == nil || !imv2.IsRetryable(err) || ctx.Err() != nil {
			return err
		}
		last = err
		delay, limited := RetryAfterOf(err)
		if limited {
			pc.block(key, delay)
		} else {
			delay = min(pc.p.Backoff<<min(attempt-1, 20), pc.p.MaxBackoff)
		}
		if attempt >= pc.p.MaxAttempts || !fits(ctx, delay) {
			return imv2.Retryable(err)
		}
		if !limited {
			if err := sleep(ctx, pc.clock, delay); err != nil {
				return imv2.Retryable(err)
			}
		}
	}
}

// block holds every call to key for d.
func (pc *pacer) block(key string, d time.Duration) {
	c := pc.conv(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := pc.clock.Now().Add(d); until.After(c.until) {
		c.until = until
	}
}

func (pc *pacer) conv(key string) *convPace {
	if c, ok := pc.convs.Get(key); ok {
		return c
	}
	c := &convPace{lim: rate.NewLimiter(pc.p.PerConversation, pc.p.ConversationBurst)}
	if prev, ok, _ := pc.convs.PeekOrAdd(key, c); ok {
		return prev
	}
	return c
}

// wait blocks until key may be called: its Retry-After is over and both
// buckets gave a token. It fails without waiting when the wait would
// overrun ctx's deadline, and gives the tokens back then.
func (pc *pacer) wait(ctx context.Context, key string) error {
	c := pc.conv(key)
	now := pc.clock.Now()
	var d time.Duration
	c.mu.Lock()
	if c.until.After(now) {
		d = c.until.Sub(now)
	}
	c.mu.Unlock()
	at := now.Add(d)
	r1 := c.lim.ReserveN(at, 1)
	r2 := pc.all.ReserveN(at, 1)
	d += max(r1.DelayFrom(at), r2.DelayFrom(at))
	if !r1.OK() || !r2.OK() || !fits(ctx, d) {
		r1.CancelAt(now)
		r2.CancelAt(now)
		return errBudget
	}
	if err := sleep(ctx, pc.clock, d); err != nil {
		r1.CancelAt(pc.clock.Now()) // the call is not made: its tokens go back
		r2.CancelAt(pc.clock.Now())
		return err
	}
	return nil
}

// fits reports whether waiting d leaves ctx time for a call.
func fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// sleep waits d on clock, or until ctx ends.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
