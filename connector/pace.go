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
	// DefaultMaxAttempts bounds the calls for one final, draft or edit.
	DefaultMaxAttempts = 8
	// DefaultBackoff is the first wait after a failure, doubling up to
	// DefaultMaxBackoff.
	DefaultBackoff    = 250 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	// DefaultMaxConversations bounds the per-conversation limiters.
	DefaultMaxConversations = 10_000
	// DefaultOrderTTL is how long an unresolved final holds its channel's
	// later finals without being resent (OrderTTL).
	DefaultOrderTTL = 2 * time.Minute
	// DefaultMaxOrderChannels bounds the channels with an unresolved final.
	DefaultMaxOrderChannels = 10_000
)

// Pace is how the kit calls the platform: at most PerConversation calls a
// second to one conversation and PerPlatform to all of them (token buckets
// of golang.org/x/time/rate), every call — final, draft, edit, typing — in
// the order the Channel makes them.
//
// Retries. A call that fails with an error not marked imv2.Refused may
// be made again by the kit, after the delay an imv2.RetryAfter error names or
// else an exponential backoff from Backoff up to MaxBackoff, up to
// MaxAttempts calls in all and only while the call's context (the Channel's
// Target timeout) leaves room for the wait. Drafts, edits, typing and
// discards are retried so: making one again shows nothing new. An Editor's
// PostDraft (a new temporary message) is made again only when its error
// says not applied (the first rule below); after any other error the
// message shows no more drafts and its final is posted whole (Editor).
// A final is posted again only when that cannot show it twice (Platform):
//   - the error says the platform did not apply the post
//     (imv2.SafeToRetry: imv2.NotPosted, imv2.RetryAfter, a dial error);
//   - else, for a PostChecker, WasPosted says it was not posted (posted:
//     the final is done, accepted);
//   - else, for an IdempotentPlatform, always (same idempotency key).
//
// Any other failed post may have been applied (a lost response): the kit
// does not post it again and answers delivery_outcome_unknown,
// retryable=false, as the Channel does for an interrupted delivery after a
// crash (imv2.ClaimStore): the sender sees the failure, nothing is shown
// twice.
//
// Outcome unknown. Such a final (its PostChecker could not answer, or
// there is none) is marked "outcome unknown, ask before posting" in the
// Store's completed records: one record per final, under its channel and
// a message ID derived from its message_id, with the records' TTL and
// cap, never removed before they expire. Every final posted by a
// platform that is not an IdempotentPlatform first looks that record up
// (one Store Lookup), so a resend of it, however late, after a restart
// or on another replica on the same Store, asks WasPosted before posting
// (rejected retryable while it cannot answer; the mark stays), or,
// without a PostChecker, is answered delivery_outcome_unknown again.
//
// Order. While the kit retries a final, the channel's later messages wait.
// When its budget is spent (or a PostChecker could not answer) the final is
// rejected retryable and xAgent sends it again (A8); until then it is the
// channel's unresolved final, and every later final of the channel is
// rejected channel_busy, retryable, in the order they came (at most 64
// queued per channel), so xAgent sends them again too and they are shown
// after it: A, B, C stay A, B, C. The hold ends when the final is shown or
// rejected for good, or when it was not sent again for OrderTTL (default 2
// minutes, four times xAgent's longest resend backoff): then the next
// queued final is the unresolved one. At most MaxOrderChannels channels
// (default 10,000) hold one; beyond it the least recently used hold is
// forgotten. Holds live in the process: a final resent to another replica
// or after a restart is not held back in order (its outcome-unknown mark,
// above, is durable).
//
// Drafts keep that order too: in modes stream and edit a message's first
// draft is its place in the chat, so it waits until the channel's finals
// sent before it were posted or rejected (the Channel holds it, at most
// the Target timeout), and while one of them is unresolved the message
// shows no draft and is shown by its final alone, behind the earlier one.
// It also waits for the channel's earlier first drafts, their retries
// included, so a rate-limited first draft keeps its place. A first draft
// the kit gives up on (its attempts spent, a refusal, or its wait cut by
// the Target timeout) is not made again: that message is shown by its
// final alone, and the channel's later messages show no draft until that
// final is shown or rejected for good (or OrderTTL passes), so none takes
// its place. At most 64 first drafts a channel and MaxOrderChannels
// channels are held in order; beyond that a first draft is made at once.
//
// Send order, exactly: the Channel's order rule (package imv2, "Order").
// On one channel a message's place in the chat is where it first
// appears, taken in the order xAgent started the messages (a message's
// first delta, or its final when it streamed none): replies show in the
// order they started in every mode — stream, edit, buffer, post-only —
// also when they overlap and their finals come in the other order.
// Messages of different channels are not ordered with each other.
//
// Zero values take the defaults: no rate limit, burst 1, 8
// attempts, 250 ms doubling to 10 s. The per-conversation limiters live in
// an LRU of MaxConversations (default 10,000) keys; an evicted key starts
// with a full bucket again, but a Retry-After still running is kept apart
// (at most MaxConversations of them; when all are running, the one ending
// first is dropped for a new one).
//
// A negative value fails New.
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
	// MaxConversations bounds the per-conversation limiters (an LRU) and
	// the running Retry-Afters; default DefaultMaxConversations.
	MaxConversations int
	// OrderTTL ends a hold whose final was not sent again for that long;
	// default DefaultOrderTTL.
	OrderTTL time.Duration
	// MaxOrderChannels bounds the channels holding an unresolved final
	// (an LRU); default DefaultMaxOrderChannels.
	MaxOrderChannels int
}

// pacer applies a Pace on a clock.
type pacer struct {
	p     Pace
	clock clock.Clock
	all   *rate.Limiter
	convs *lru.Cache[string, *rate.Limiter]

	mu    sync.Mutex
	until map[string]time.Time // running Retry-Afters, apart from convs so eviction keeps them
}

func newPacer(p Pace, clk clock.Clock) (*pacer, error) {
	if p.PerConversation < 0 || p.PerPlatform < 0 || p.MaxAttempts < 0 || p.Backoff < 0 || p.MaxBackoff < 0 ||
		p.MaxConversations < 0 || p.OrderTTL < 0 || p.MaxOrderChannels < 0 || p.ConversationBurst < 0 || p.PlatformBurst < 0 {
		return nil, errors.New("connector: negative Pace value")
	}
	if p.PerConversation == 0 {
		p.PerConversation = float64(rate.Inf)
	}
	if p.PerPlatform == 0 {
		p.PerPlatform = float64(rate.Inf)
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
	if p.OrderTTL == 0 {
		p.OrderTTL = DefaultOrderTTL
	}
	if p.MaxOrderChannels == 0 {
		p.MaxOrderChannels = DefaultMaxOrderChannels
	}
	convs, err := lru.New[string, *rate.Limiter](p.MaxConversations)
	if err != nil {
		return nil, err
	}
	return &pacer{p: p, clock: clk, all: rate.NewLimiter(rate.Limit(p.PerPlatform), p.PlatformBurst), convs: convs, until: map[string]time.Time{}}, nil
}

// errBudget says a call was not made: its wait would overrun the budget.
var errBudget = errors.New("connector: platform rate limit: no time left to wait within the Target timeout")

// errRepost is what a settle returns to have the call made again.
var errRepost = errors.New("connector: post again")

// settle decides what follows a final's post that failed with err, an
// error whose outcome is unknown (neither imv2.SafeToRetry nor
// imv2.IsRefused): errRepost
// to post again, nil when the platform shows the final, any other error to
// end with it. nil settle (drafts, edits, typing) always posts again.
type settle func(ctx context.Context, err error) error

// do calls f for the conversation key under the limits, retrying as Pace
// says. The error is f's last, or errBudget's wrap, marked retryable
// unless f said permanent, or what s answered.
func (pc *pacer) do(ctx context.Context, key string, f func(context.Context) error, s settle) error {
	var last error
	for attempt := 1; ; attempt++ {
		if err := pc.wait(ctx, key); err != nil {
			if last != nil {
				return imv2.NotPosted(fmt.Errorf("%w (after %d attempts: %v)", err, attempt-1, last))
			}
			return imv2.NotPosted(err)
		}
		err := f(ctx)
		if err == nil || imv2.IsRefused(err) {
			return err
		}
		if s != nil && !imv2.SafeToRetry(err) { // unknown: it may have been applied
			if serr := s(ctx, err); serr != errRepost {
				return serr
			}
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
		if attempt >= pc.p.MaxAttempts || !fits(ctx, delay) {
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
// the key's limiter, so an LRU eviction of the limiter does not forget it;
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

func (pc *pacer) conv(key string) *rate.Limiter {
	if c, ok := pc.convs.Get(key); ok {
		return c
	}
	c := rate.NewLimiter(rate.Limit(pc.p.PerConversation), pc.p.ConversationBurst)
	if prev, ok, _ := pc.convs.PeekOrAdd(key, c); ok {
		return prev
	}
	return c
}

// wait blocks until key may be called: its Retry-After is over and both
// buckets gave a token. It fails without waiting when the wait would
// overrun ctx's deadline, and gives the tokens back then.
func (pc *pacer) wait(ctx context.Context, key string) error {
	lim := pc.conv(key)
	now := pc.clock.Now()
	d := pc.blocked(key, now)
	at := now.Add(d)
	r1 := lim.ReserveN(at, 1)
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
