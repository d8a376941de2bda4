package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// lane is the spacing of calls under one rate: a conversation's or the
// platform's (GCRA: tat is when the bucket is full again, slack what a
// burst may run ahead of it).
type lane struct {
	gap, slack time.Duration // 1/rate and (burst-1)/rate; gap 0: no limit
	tat, prev  time.Time     // prev: tat before the last departure, to move it
	last       uint64        // id of the last departure
	queue      []*turn       // calls waiting, first in line first
	moved      chan struct{} // a conversation's: closed when the head of queue leaves
}

func newLane(rate float64, burst int) lane {
	if rate == 0 {
		return lane{}
	}
	// At least a call a day (and a burst's slack at most a year): larger
	// gaps would overflow the times they are added to.
	gap := time.Duration(min(float64(time.Second)/rate, float64(24*time.Hour)))
	slack := time.Duration(min(float64(burst-1)*float64(gap), float64(365*24*time.Hour)))
	return lane{gap: gap, slack: slack}
}

// delay is how long a new departure waits at now.
func (l *lane) delay(now time.Time) time.Duration {
	if l.gap == 0 {
		return 0
	}
	return l.tat.Add(-l.slack).Sub(now)
}

func (l *lane) depart(now time.Time, id uint64) {
	l.prev, l.last = l.tat, id
	l.tat = later(l.tat, now).Add(l.gap)
}

// move puts the lane's last departure at now instead.
func (l *lane) move(now time.Time) {
	if l.gap != 0 {
		l.tat = later(l.prev, now).Add(l.gap)
	}
}

// leave takes t out of the queue, waking the next in line when t led it.
func (l *lane) leave(t *turn) {
	i := slices.Index(l.queue, t)
	if i < 0 {
		return
	}
	l.queue = slices.Delete(l.queue, i, i+1)
	if i == 0 && l.moved != nil {
		close(l.moved)
		l.moved = nil
	}
}

// leaveAll takes t out of the platform's line, telling the next in line
// when t led it: only the line's head watches the clock, so a departure
// wakes one waiting call, not all of them.
func (pc *pacer) leaveAll(t *turn) {
	q := &pc.all.queue
	i := slices.Index(*q, t)
	if i < 0 {
		return
	}
	*q = slices.Delete(*q, i, i+1)
	if i == 0 && len(*q) > 0 {
		select {
		case (*q)[0].next <- struct{}{}:
		default: // told already
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// turn is one call's pacing: the kit let it go (departed, with id); the
// platform's method may move that departure (its first Turn) and take
// further ones (each later Turn).
type turn struct {
	pc     *pacer
	key    string
	conv   *lane
	mu     sync.Mutex // a method's Turns, one at a time
	id     uint64
	called bool          // the method called Turn: the next is a departure of its own
	next   chan struct{} // told when t heads the platform's line (one slot)
}

type turnKey struct{}

// Turn waits until the platform may make a call to the conversation of
// ctx: ctx is the one the kit passed to a Platform method (or derived
// from it); with any other ctx Turn returns at once. A method that makes
// its platform call at once needs no Turn: the kit lets it go at its turn
// under Pace. A method that does something first (writes to a store,
// uploads) or makes several platform calls calls Turn just before each:
// its first Turn moves the call's departure to then, so the next call is
// spaced from it, and each later Turn waits a turn of its own under
// PerConversation and PerPlatform (and a running Retry-After). The error
// is imv2.NotPosted: the wait did not fit ctx's deadline, or ctx ended.
func Turn(ctx context.Context) error {
	t, ok := ctx.Value(turnKey{}).(*turn)
	if !ok {
		return ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.called
	t.called = true
	if err := t.pc.take(ctx, t, first); err != nil {
		return imv2.NotPosted(err)
	}
	return nil
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

// conv is key's lane, made on first use.
func (pc *pacer) conv(key string) *lane {
	if c, ok := pc.convs.Get(key); ok {
		return c
	}
	l := newLane(pc.p.PerConversation, pc.p.ConversationBurst)
	c := &l
	if prev, ok, _ := pc.convs.PeekOrAdd(key, c); ok {
		return prev
	}
	return c
}

// take lets t depart once its conversation's earlier calls did, its
// Retry-After is over and both lanes allow it, re-checking after every
// wait (a timer may fire late). A call its conversation lets go waits
// for the platform's rate in one line with the other conversations'
// (first come, first served), where only the head watches the clock. With
// first, a lane whose last departure is still t's own (the kit's, before
// the method ran) has it moved to now rather than waiting a second turn
// there. It fails without waiting when the wait would overrun ctx's
// deadline.
func (pc *pacer) take(ctx context.Context, t *turn, first bool) error {
	l := t.conv
	pc.mu.Lock()
	ownConv := first && l.last == t.id && t.id != 0
	ownAll := first && pc.all.last == t.id && t.id != 0
	if !ownConv {
		// Behind the calls in line: each leaves at least a gap after the
		// one before, so a wait that cannot fit fails now.
		ahead := time.Duration(len(l.queue)) * l.gap
		if d := max(l.delay(pc.clock.Now()), 0) + ahead; len(l.queue) > 0 && !pc.fits(ctx, d) {
			pc.mu.Unlock()
			return errBudget
		}
		l.queue = append(l.queue, t)
	}
	inAll := false // t is in the platform's line
	quit := func() {
		l.leave(t)
		if inAll {
			pc.leaveAll(t)
		}
	}
	for {
		if !ownConv && l.queue[0] != t {
			if l.moved == nil {
				l.moved = make(chan struct{})
			}
			moved := l.moved
			pc.mu.Unlock()
			select {
			case <-moved:
			case <-ctx.Done():
				pc.mu.Lock()
				quit()
				pc.mu.Unlock()
				return ctx.Err()
			}
			pc.mu.Lock()
			continue
		}
		now := pc.clock.Now()
		d := pc.blockedLocked(t.key, now)
		if !ownConv {
			d = max(d, l.delay(now))
		}
		if d > 0 && inAll { // held by its conversation again (a Retry-After came)
			pc.leaveAll(t)
			inAll = false
		}
		if d <= 0 && !ownAll && pc.all.gap != 0 {
			if !inAll {
				ahead := time.Duration(len(pc.all.queue)) * pc.all.gap
				if len(pc.all.queue) > 0 && !pc.fits(ctx, max(pc.all.delay(now), 0)+ahead) {
					quit()
					pc.mu.Unlock()
					return errBudget
				}
				pc.all.queue = append(pc.all.queue, t)
				inAll = true
			}
			if pc.all.queue[0] != t {
				pc.mu.Unlock()
				select {
				case <-t.next:
				case <-ctx.Done():
					pc.mu.Lock()
					quit()
					pc.mu.Unlock()
					return ctx.Err()
				}
				pc.mu.Lock()
				continue
			}
			d = pc.all.delay(now)
		}
		if d <= 0 {
			pc.seq++
			for _, ln := range []*lane{l, &pc.all} {
				if own := (ln == l && ownConv) || (ln == &pc.all && ownAll); own {
					ln.move(now)
				} else {
					ln.depart(now, pc.seq)
				}
			}
			t.id = pc.seq
			quit()
			pc.mu.Unlock()
			return nil
		}
		if !pc.fits(ctx, d) {
			quit()
			pc.mu.Unlock()
			return errBudget
		}
		pc.mu.Unlock()
		err := sleep(ctx, pc.clock, d)
		pc.mu.Lock()
		if err != nil {
			quit()
			pc.mu.Unlock()
			return err
		}
	}
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
