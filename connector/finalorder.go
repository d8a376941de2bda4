package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector/internal/display"
)

// maxOrderQueue bounds the finals one channel queues behind its unresolved
// final (imv2's default MaxInflight): later ones are still rejected busy,
// but are not promised a place.
const maxOrderQueue = 64

// finalOrder keeps arrival order across the retry budget (Pace, "Order"):
// per channel, the final that was rejected retryable and not yet shown,
// and the finals rejected busy behind it, oldest first. Message IDs are
// remote input: the channels are an LRU of MaxOrderChannels, each queue
// holds at most maxOrderQueue IDs, and an entry not seen for OrderTTL is
// dropped.
type finalOrder struct {
	clock clock.Clock
	ttl   time.Duration

	mu    sync.Mutex
	chans *simplelru.LRU[string, []heldFinal]
}

// heldFinal is one final of a channel's queue.
type heldFinal struct {
	id   string
	seen time.Time // its last attempt or busy answer
	// unknown: its last post may have been applied; a resend asks the
	// PostChecker first.
	unknown bool
}

func newFinalOrder(p Pace, clk clock.Clock) *finalOrder {
	chans, _ := simplelru.NewLRU[string, []heldFinal](p.MaxOrderChannels, nil) // size > 0: newPacer set the default
	return &finalOrder{clock: clk, ttl: p.OrderTTL, chans: chans}
}

// admit says whether final id of channelID may be posted now: nil when the
// channel holds nothing or id is its unresolved final (unknown then says
// whether its last post may have been applied), else a channel_busy
// rejection, retryable, with id queued behind.
func (fo *finalOrder) admit(channelID, id string) (unknown bool, err error) {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	q, ok := fo.chans.Get(channelID)
	if !ok {
		return false, nil
	}
	now := fo.clock.Now()
	q = slices.DeleteFunc(q, func(f heldFinal) bool { return now.Sub(f.seen) >= fo.ttl })
	if len(q) == 0 {
		fo.chans.Remove(channelID)
		return false, nil
	}
	i := slices.IndexFunc(q, func(f heldFinal) bool { return f.id == id })
	switch {
	case i >= 0:
		q[i].seen = now
	case len(q) < maxOrderQueue:
		q = append(q, heldFinal{id: id, seen: now})
	}
	fo.chans.Add(channelID, q)
	if i == 0 {
		return q[0].unknown, nil
	}
	return false, &imv2.Error{Code: imv2.CodeChannelBusy, Retryable: true,
		Message: fmt.Sprintf("final %q waits for the earlier final %q, not shown yet", id, q[0].id)}
}

// settle records how final id, admitted, ended: shown or rejected for good
// (err nil or not retryable) ends its hold and the next queued final is
// the channel's unresolved one; a retryable err makes id the unresolved
// final, unknown saying whether its post may have been applied.
func (fo *finalOrder) settle(channelID, id string, err error, unknown bool) {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	q, _ := fo.chans.Peek(channelID)
	i := slices.IndexFunc(q, func(f heldFinal) bool { return f.id == id })
	if err == nil || !imv2.SafeToRetry(err) {
		if i < 0 {
			return
		}
		q = slices.Delete(q, i, i+1)
		if len(q) == 0 {
			fo.chans.Remove(channelID)
		} else {
			fo.chans.Add(channelID, q)
		}
		return
	}
	f := heldFinal{id: id, seen: fo.clock.Now(), unknown: unknown}
	if i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	fo.chans.Add(channelID, slices.Insert(q, 0, f))
}

// holds reports whether channelID has an unresolved final (rejected
// retryable, not shown yet) younger than the TTL.
func (fo *finalOrder) holds(channelID string) bool {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	q, ok := fo.chans.Peek(channelID)
	if !ok {
		return false
	}
	now := fo.clock.Now()
	return slices.ContainsFunc(q, func(f heldFinal) bool { return now.Sub(f.seen) < fo.ttl })
}

// orderedOutbound is the display.Platform the kit gives display.New: the
// outbound calls, with every final — Post, Finish — run under the
// channel's order, and every message's first draft behind the channel's
// unfinished finals and earlier first drafts. Embedding passes every
// display capability on.
type orderedOutbound struct {
	*outbound
	order  *finalOrder
	places *draftPlaces
}

func newOrderedOutbound(o *outbound, p Pace, clk clock.Clock) *orderedOutbound {
	return &orderedOutbound{outbound: o, order: newFinalOrder(p, clk), places: newDraftPlaces(p, clk)}
}

// errEarlierFinal is why a message's drafts are skipped: an earlier final
// of the channel is not shown yet and cannot be waited for.
var errEarlierFinal = errors.New("an earlier final of the channel is not shown yet; this message is shown by its final alone")

// firstDraft makes a message's first draft (its place in the chat, in
// modes stream and edit) in order. The Channel already held it until the
// finals sent before it were delivered or rejected (imv2's showDrafts);
// when one was rejected retryable and waits for xAgent's resend
// (unresolved), the message gets no draft (display.ErrSkipDraft): its
// final, held behind the earlier one, shows it. It then waits for the
// channel's earlier first drafts, retries included (draftPlaces), so
// replies show in send order.
func (oo *orderedOutbound) firstDraft(ctx context.Context, channelID, messageID string, first func(context.Context) error) error {
	var hold error
	if oo.order.holds(channelID) {
		hold = skipDraft(errEarlierFinal)
	}
	return oo.places.made(ctx, channelID, messageID, hold, first)
}

// Draft implements display.Drafter; a message's first draft is made in
// order (firstDraft).
func (oo *orderedOutbound) Draft(ctx context.Context, channelID string, d display.Draft) (string, error) {
	if d.Handle != "" {
		return oo.outbound.Draft(ctx, channelID, d)
	}
	var h string
	err := oo.firstDraft(ctx, channelID, d.MessageID, func(ctx context.Context) (err error) {
		h, err = oo.outbound.Draft(ctx, channelID, d)
		return err
	})
	return h, err
}

// PostDraft implements display.Editor: the temporary message, the first
// draft of its message, is made in order (firstDraft).
func (oo *orderedOutbound) PostDraft(ctx context.Context, channelID, messageID, text string) (string, error) {
	var h string
	err := oo.firstDraft(ctx, channelID, messageID, func(ctx context.Context) (err error) {
		h, err = oo.outbound.PostDraft(ctx, channelID, messageID, text)
		return err
	})
	return h, err
}

// Post implements display.Platform under the channel's order.
func (oo *orderedOutbound) Post(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	return oo.ordered(ctx, channelID, m, func(ctx context.Context) error { return oo.outbound.Post(ctx, channelID, m) })
}

// Finish implements display.Drafter and display.Editor under the
// channel's order.
func (oo *orderedOutbound) Finish(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error {
	return oo.ordered(ctx, channelID, m, func(ctx context.Context) error { return oo.outbound.Finish(ctx, channelID, handle, m) })
}

// ordered runs one delivery of final m: a later final waits, rejected
// busy, while an earlier one is unresolved; the delivery's finalRun goes
// down in ctx to outbound.final.
func (oo *orderedOutbound) ordered(ctx context.Context, channelID string, m *imv2.ChatMessage, run func(context.Context) error) error {
	unknown, err := oo.order.admit(channelID, m.MessageID)
	if err != nil {
		return err
	}
	r := &finalRun{unknown: unknown}
	err = run(context.WithValue(ctx, finalRunKey{}, r))
	oo.order.settle(channelID, m.MessageID, err, r.unknown)
	if err == nil || !imv2.SafeToRetry(err) {
		oo.places.settled(channelID, m.MessageID)
	}
	return err
}

// finalRun is the state of one delivery of a final.
type finalRun struct {
	// unknown: the last post may have been applied; a resend asks the
	// PostChecker before posting.
	unknown bool
}

type finalRunKey struct{}

// runOf returns the delivery state ordered put in ctx, or a fresh one.
func runOf(ctx context.Context) *finalRun {
	if r, ok := ctx.Value(finalRunKey{}).(*finalRun); ok {
		return r
	}
	return &finalRun{}
}
