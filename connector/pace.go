package connector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
)

// Defaults of Pace.
const (
	// DefaultMaxAttempts bounds the calls for one final, draft or edit.
	DefaultMaxAttempts = 8
	// DefaultBackoff is the first wait after a failure, doubling up to
	// DefaultMaxBackoff.
	DefaultBackoff    = 250 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	// DefaultMaxConversations bounds the per-conversation spacings.
	DefaultMaxConversations = 10_000
)

// Pace is how the kit calls the platform: at most PerConversation calls a
// second to one conversation and PerPlatform to all of them, every call —
// final, draft, edit, typing — in the order the Channel makes them. Pace
// is the one bound on the platform's rate: a Platform keeps no gaps of its
// own.
//
// Departures. The gaps are measured between the moments calls left, not
// between turns granted ahead (a token bucket's reservations): a call let
// go late — a paused process wakes all its timers at once — still leaves
// a gap after the one before it. A method that makes its platform call at
// once needs nothing more: it leaves when the kit calls it. One that does
// something first (writes to a store, uploads) or makes several platform
// calls calls Turn(ctx) just before each: the first moves the call's
// departure to then, each later one waits a turn of its own.
//
// Retries. A call whose error says it was not applied (imv2.SafeToRetry:
// imv2.NotPosted, imv2.RetryAfter, a dial error) is made again by the
// kit, after the delay an imv2.RetryAfter names or else an exponential
// backoff from Backoff up to MaxBackoff, up to MaxAttempts calls in all
// and only while the call's context (the Channel's Target timeout) leaves
// room for the wait; then a final is rejected retryable and xAgent sends
// it again (A8). A refusal (imv2.IsRefused) is never made again. A call
// whose outcome is unknown (any other error: it may have been applied) is
// made again only when that shows nothing new — a later draft, an edit,
// typing, a discard. A final's unknown outcome goes back to the Channel,
// which decides it once for every Connector (package imv2, the error
// contract): asked of the PostChecker, posted again to an
// IdempotentPlatform by xAgent's resend, else delivery_outcome_unknown,
// its claim kept in the Store so that no resend, however late, after a
// restart or on another replica, posts it. An Editor's PostDraft or a
// Drafter's first Draft of unknown outcome ends that message's drafts:
// its final is posted whole (Editor).
//
// Order is the Channel's (package imv2, "Order"): replies show in the
// order they started (first delta, or final) in every mode, overlapping
// ones too, and a final rejected retryable holds the channel's later
// messages until xAgent resent it (Options.Advanced.Channel.OrderTTL).
//
// Zero values take the defaults: no rate limit, burst 1 (a burst of n
// lets n calls leave at once after a pause of n gaps), 8 attempts, 250 ms
// doubling to 10 s. The per-conversation spacings live in an LRU of
// MaxConversations (default 10,000) keys; an evicted key starts afresh,
// but a Retry-After still running is kept apart (at most MaxConversations
// of them; when all are running, the one ending first is dropped for a new
// one).
//
// A negative or NaN value fails New; a rate under one call a day counts
// as one a day.
type Pace struct {
	// PerConversation is the calls a second to one conversation (0.5:
	// one every 2 s); default 0, no limit. ConversationBurst is its
	// bucket; default 1.
	PerConversation   float64
	ConversationBurst int
	// PerPlatform is the calls a second to all conversations together;
	// default 0, no limit. PlatformBurst is its bucket; default 1.
	PerPlatform   float64
	PlatformBurst int
	// MaxAttempts bounds the calls made for one final, draft or edit,
	// the first included; default DefaultMaxAttempts.
	MaxAttempts int
	// Backoff is the first wait after a failure without a Retry-After,
	// doubling to MaxBackoff; defaults DefaultBackoff, DefaultMaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// MaxConversations bounds the per-conversation spacings (an LRU) and
	// the running Retry-Afters; default DefaultMaxConversations.
	MaxConversations int
}

// pacer applies a Pace on a clock. Its gaps are measured between
// departures — the moments calls were let go — not tokens reserved ahead:
// a call let go late (a paused process wakes all its timers at once) or
// that leaves late (the platform's method writes something first and then
// calls Turn) moves the next call's turn with it.
type pacer struct {
	p     Pace
	clock clock.Clock
	convs *lru.Cache[string, *lane]

	mu    sync.Mutex // guards the lanes, their queues and until
	all   lane
	seq   uint64               // departures so far: a departure's id
	until map[string]time.Time // running Retry-Afters, apart from convs so eviction keeps them
}

func newPacer(p Pace, clk clock.Clock) (*pacer, error) {
	if !(p.PerConversation >= 0) || !(p.PerPlatform >= 0) || p.MaxAttempts < 0 || p.Backoff < 0 || p.MaxBackoff < 0 ||
		p.MaxConversations < 0 || p.ConversationBurst < 0 || p.PlatformBurst < 0 {
		return nil, errors.New("connector: negative (or NaN) Pace value")
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
	convs, err := lru.New[string, *lane](p.MaxConversations)
	if err != nil {
		return nil, err
	}
	return &pacer{p: p, clock: clk, all: newLane(p.PerPlatform, p.PlatformBurst), convs: convs, until: map[string]time.Time{}}, nil
}

// errBudget says a call was not made: its wait would overrun the budget.
var errBudget = errors.New("connector: platform rate limit: no time left to wait within the Target timeout")

// do calls f for the conversation key under the limits, retrying as Pace
// says: a call that was not applied, and for a call that is not a final
// (final false) one whose outcome is unknown too. The error is f's last,
// marked imv2.NotPosted when the retries are spent (or errBudget's wrap
// when there was no time left to wait), or f's as is when it was refused
// or, for a final, its outcome is unknown.
func (pc *pacer) do(ctx context.Context, key string, final bool, f func(context.Context) error) error {
	var last error
	for attempt := 1; ; attempt++ {
		t := &turn{pc: pc, key: key, conv: pc.conv(key), next: make(chan struct{}, 1)}
		if err := pc.take(ctx, t, false); err != nil {
			if last != nil {
				return imv2.NotPosted(fmt.Errorf("%w (after %d attempts: %v)", err, attempt-1, last))
			}
			return imv2.NotPosted(err)
		}
		err := f(context.WithValue(ctx, turnKey{}, t))
		if err == nil || imv2.IsRefused(err) || (final && !imv2.SafeToRetry(err)) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		last = err
		delay, limited := imv2.RetryAfterOf(err)
		if limited {
			pc.block(key, delay)
		} else {
			delay = min(pc.p.Backoff<<min(attempt-1, 20), pc.p.MaxBackoff)
		}
		if attempt >= pc.p.MaxAttempts || !pc.fits(ctx, delay) {
			return imv2.NotPosted(err)
		}
		if !limited {
			if err := sleep(ctx, pc.clock, delay); err != nil {
				return imv2.NotPosted(err)
			}
		}
	}
}

// block holds every call to key for d. The deadline is kept apart from
// the key's lane, so an LRU eviction of the lane does not forget it;
// at most MaxConversations are kept: when all are running, the one ending
// first gives way.
func (pc *pacer) block(key string, d time.Duration) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	now := pc.clock.Now()
	until := now.Add(d)
	if old, ok := pc.until[key]; ok {
		if until.After(old) {
			pc.until[key] = until
		}
		return
	}
	if len(pc.until) >= pc.p.MaxConversations {
		first, firstAt := "", time.Time{}
		for k, t := range pc.until {
			if !t.After(now) {
				delete(pc.until, k)
			} else if first == "" || t.Before(firstAt) {
				first, firstAt = k, t
			}
		}
		if len(pc.until) >= pc.p.MaxConversations {
			delete(pc.until, first)
		}
	}
	pc.until[key] = until
}

// blocked returns how long key is still held by a Retry-After.
func (pc *pacer) blocked(key string, now time.Time) time.Duration {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.blockedLocked(key, now)
}

func (pc *pacer) blockedLocked(key string, now time.Time) time.Duration {
	until, ok := pc.until[key]
	if !ok {
		return 0
	}
	if !until.After(now) {
		delete(pc.until, key)
		return 0
	}
	return until.Sub(now)
}

// fits reports whether waiting d leaves ctx time for a call. The
// deadline is on the pacer's clock (the Channel's Target timeout is).
func (pc *pacer) fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || dl.Sub(pc.clock.Now()) > d
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
