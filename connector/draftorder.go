package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector/internal/display"
)

// draftPlaces keeps the first drafts of a channel's messages — each
// message's place in the chat, in modes stream and edit — in the order
// they came (Pace, "Drafts keep that order too"). A first draft waits
// while an earlier one of the channel is still being made (a Retry-After
// or backoff included). One given up — its retries spent, or its wait cut
// by the Target timeout — is "lost": the message is shown by its final
// alone, and the channel's later messages show no draft either until that
// final is shown or rejected for good (or OrderTTL passes), so they do not
// take its place. Message IDs are remote input: at most maxOrderQueue
// places a channel and MaxOrderChannels channels are kept; beyond that a
// first draft is not held in order.
type draftPlaces struct {
	clock clock.Clock
	ttl   time.Duration
	max   int

	mu    sync.Mutex
	chans map[string][]*place
}

// place is one message's first draft, from its call to its final when lost.
type place struct {
	id   string
	done chan struct{} // closed when the first draft's call ended
	lost bool          // given up: the message is shown by its final alone
	seen time.Time     // when it was lost
}

// errEarlierDraft is why a message shows no draft: an earlier message's
// first draft was given up, and that message is not shown yet.
var errEarlierDraft = errors.New("an earlier message of the channel is shown by its final alone and is not shown yet; this message is too")

func newDraftPlaces(p Pace, clk clock.Clock) *draftPlaces {
	return &draftPlaces{clock: clk, ttl: p.OrderTTL, max: p.MaxOrderChannels, chans: map[string][]*place{}}
}

// take waits until message id's first draft may be made on channelID:
// the earlier first drafts of the channel ended. It returns the place to
// end, or nil when the draft is not held in order (over the caps), or a
// display.ErrSkipDraft error, permanent, when the message is to be shown
// by its final alone: an earlier message is (lost), or hold says so, or
// ctx ended first.
func (dp *draftPlaces) take(ctx context.Context, channelID, id string, hold error) (*place, error) {
	dp.mu.Lock()
	q := dp.liveLocked(channelID)
	if len(q) >= maxOrderQueue || (q == nil && len(dp.chans) >= dp.max) {
		dp.mu.Unlock()
		return nil, hold
	}
	p := &place{id: id, done: make(chan struct{})}
	earlier := slices.Clone(q)
	dp.chans[channelID] = append(q, p)
	dp.mu.Unlock()
	if hold != nil {
		dp.end(channelID, p, true)
		return nil, hold
	}
	for _, e := range earlier {
		select {
		case <-e.done:
		case <-ctx.Done():
			err := skipDraft(fmt.Errorf("waiting for an earlier message's first draft: %w", ctx.Err()))
			dp.end(channelID, p, true)
			return nil, err
		}
		dp.mu.Lock()
		lost := e.lost
		dp.mu.Unlock()
		if lost {
			err := skipDraft(errEarlierDraft)
			dp.end(channelID, p, true)
			return nil, err
		}
	}
	return p, nil
}

// liveLocked returns channelID's places, the lost ones older than the TTL
// dropped.
func (dp *draftPlaces) liveLocked(channelID string) []*place {
	q, ok := dp.chans[channelID]
	if !ok {
		return nil
	}
	now := dp.clock.Now()
	q = slices.DeleteFunc(q, func(p *place) bool { return p.lost && now.Sub(p.seen) >= dp.ttl })
	if len(q) == 0 {
		delete(dp.chans, channelID)
		return nil
	}
	dp.chans[channelID] = q
	return q
}

// end records that p's first draft ended: shown, or perhaps shown (a
// lost response), frees the place; lost keeps it until the message's
// final settles.
func (dp *draftPlaces) end(channelID string, p *place, lost bool) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if lost {
		p.lost, p.seen = true, dp.clock.Now()
	} else {
		dp.removeLocked(channelID, func(e *place) bool { return e == p })
	}
	close(p.done)
}

// made runs first, the first draft of message id on channelID, in its
// place. A failure other than a lost response (display.ErrSkipDraft,
// the draft may be shown) — retries spent, or a permanent refusal — makes
// the place lost and is answered display.ErrSkipDraft: the message is
// shown by its final alone, never by a later first draft below a later
// message's.
func (dp *draftPlaces) made(ctx context.Context, channelID, id string, hold error, first func(context.Context) error) error {
	p, err := dp.take(ctx, channelID, id, hold)
	if err != nil {
		return err
	}
	err = first(ctx)
	if p == nil {
		return err
	}
	lost := err != nil && !errors.Is(err, display.ErrSkipDraft)
	dp.end(channelID, p, lost)
	if lost {
		return skipDraft(err)
	}
	return err
}

// settled frees the place of message id, its final shown or rejected for
// good.
func (dp *draftPlaces) settled(channelID, id string) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	dp.removeLocked(channelID, func(e *place) bool { return e.id == id && e.lost })
}

func (dp *draftPlaces) removeLocked(channelID string, match func(*place) bool) {
	q, ok := dp.chans[channelID]
	if !ok {
		return
	}
	q = slices.DeleteFunc(q, match)
	if len(q) == 0 {
		delete(dp.chans, channelID)
		return
	}
	dp.chans[channelID] = q
}

// skipDraft is the error that has the display show a message by its final
// alone (display.ErrSkipDraft), permanent so the kit does not retry it.
func skipDraft(err error) error {
	return imv2.Refused(fmt.Errorf("connector: %w: %w", display.ErrSkipDraft, err))
}
