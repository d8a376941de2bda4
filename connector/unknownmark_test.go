package connector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

// downChecker is a lossy platform whose PostChecker fails its first
// fails calls.
type downChecker struct {
	*lossy
	fails int
}

func (p *downChecker) WasPosted(_ context.Context, _ Conversation, key string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fails > 0 {
		p.fails--
		return false, errors.New("checker unavailable")
	}
	return p.keys[key], nil
}

// TestKit_S8_UnknownOutcomeMarkOutlivesOrderHold: a final whose post may
// have been applied (lost response) and whose PostChecker could not answer
// is rejected retryable and marked durably in the Store; a resend asks the
// checker before posting however late it comes (past OrderTTL, when the
// in-process hold is gone) and wherever (a restarted kit on the same
// Store), so the final is shown once. While the checker keeps failing the
// resend stays rejected retryable and posts nothing.
func TestKit_S8_UnknownOutcomeMarkOutlivesOrderHold(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		wait    time.Duration
	}{
		{"within the hold", false, time.Second},
		{"after OrderTTL", false, DefaultOrderTTL},
		{"after a restart", true, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemoryStore(fakeclock.New(time.Unix(1_790_000_000, 0)))
			p := &downChecker{lossy: &lossy{lose: 1}, fails: 2}
			k, clock := newUnit(t, p, false, Options{Store: store})
			oo := newOrderedOutbound(k.out, k.pace.p, clock)
			ctx := context.Background()
			m := &imv2.ChatMessage{MessageID: "m1", Text: "hi"}
			if err := oo.Post(ctx, "ch_1", m); !imv2.SafeToRetry(err) {
				t.Fatalf("first send: %v; want rejected retryable", err)
			}
			clock.Advance(tc.wait)
			if tc.restart {
				k.Close()
				k, clock = newUnit(t, p, false, Options{Store: store})
				oo = newOrderedOutbound(k.out, k.pace.p, clock)
			}
			if err := oo.Post(ctx, "ch_1", m); !imv2.SafeToRetry(err) { // the checker fails once more
				t.Fatalf("resend with the checker down: %v; want rejected retryable", err)
			}
			if posts, _ := p.got(); posts != 1 {
				t.Fatalf("posts = %d with the outcome unknown; want 1", posts)
			}
			clock.Advance(DefaultOrderTTL)
			if err := oo.Post(ctx, "ch_1", m); err != nil {
				t.Fatalf("resend with the checker back: %v", err)
			}
			if posts, shown := p.got(); posts != 1 || len(shown) != 1 {
				t.Errorf("posts %d, shown %v; want the final shown once", posts, shown)
			}
		})
	}
}

// TestKit_S8_UnknownOutcomeMarkWithoutCheckerAnswersUnknown: without a
// PostChecker a final whose post may have been applied is answered
// delivery_outcome_unknown, and so is any later resend of it, after the
// hold went: it is never posted a second time.
func TestKit_S8_UnknownOutcomeMarkWithoutCheckerAnswersUnknown(t *testing.T) {
	p := &lossy{lose: 1}
	k, clock := newUnit(t, p, false, Options{})
	oo := newOrderedOutbound(k.out, k.pace.p, clock)
	ctx := context.Background()
	m := &imv2.ChatMessage{MessageID: "m1", Text: "hi"}
	unknown := &imv2.Error{Code: imv2.CodeDeliveryOutcomeUnknown}
	if err := oo.Post(ctx, "ch_1", m); !errors.Is(err, unknown) {
		t.Fatalf("first send: %v; want delivery_outcome_unknown", err)
	}
	clock.Advance(DefaultOrderTTL)
	if err := oo.Post(ctx, "ch_1", m); !errors.Is(err, unknown) || imv2.SafeToRetry(err) {
		t.Fatalf("resend: %v; want delivery_outcome_unknown, not retryable", err)
	}
	if posts, shown := p.got(); posts != 1 || len(shown) != 1 {
		t.Errorf("posts %d, shown %v; want one post", posts, shown)
	}
}
