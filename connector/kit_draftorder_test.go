package connector_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
)

// firstDraftRefused is a chat service that answers the first draft of
// every message named in refuse with a Retry-After, then shows it; the
// message IDs are logged in the order the chat shows them (first draft,
// temporary post or final, whichever comes first).
type firstDraftRefused struct {
	*noticeFirst
	after   time.Duration
	refuse  map[string]bool
	refused chan string // the message whose first draft was just refused
}

func (p *firstDraftRefused) first(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse[id] {
		delete(p.refuse, id)
		p.refused <- id
		return imv2.RetryAfter(errors.New("429 Too Many Requests"), p.after)
	}
	p.show(id)
	return nil
}

func (p *firstDraftRefused) expect(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse[id] = true
}

// firstDraftRefusedEdit is mode edit: a temporary message it edits.
type firstDraftRefusedEdit struct{ *firstDraftRefused }

func (p firstDraftRefusedEdit) PostDraft(_ context.Context, _ connector.Conversation, messageID, _ string) (string, error) {
	return messageID, p.first(messageID)
}

func (firstDraftRefusedEdit) Edit(context.Context, connector.Conversation, string, string) error {
	return nil
}

// firstDraftRefusedStream is mode stream: a native draft API.
type firstDraftRefusedStream struct{ *firstDraftRefused }

func (p firstDraftRefusedStream) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	if d.Handle != "" {
		return d.Handle, nil
	}
	return d.MessageID, p.first(d.MessageID)
}

// TestKit_M14_D8_RetriedFirstDraftKeepsItsPlace is the repro of issue 24
// item 10's remaining reorder: message A's first draft is answered with a
// Retry-After; B's first delta comes during the wait, then A's final and
// B's final. A's first draft is its place in the chat, so B must not show
// above it when the wait ends: 200 of 200 runs, in modes stream and edit,
// with A's first draft made again within the kit's retry budget
// ("retried") and given up beyond it ("given-up": MaxAttempts 1; A is
// then shown by its final alone and B, waiting for it, too), and without
// a rate limit ("unlimited": two replies streamed at once).
//
// The clock is the real one: the race is between two goroutines woken by
// the end of one Retry-After, which a fake clock would wake in one order.
func TestKit_M14_D8_RetriedFirstDraftKeepsItsPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     connector.Mode
		name     string
		attempts int
		refuse   bool
	}{
		{connector.ModeStream, "retried", 0, true}, {connector.ModeEdit, "retried", 0, true},
		{connector.ModeStream, "given-up", 1, true}, {connector.ModeEdit, "given-up", 1, true},
		{connector.ModeStream, "unlimited", 0, false}, {connector.ModeEdit, "unlimited", 0, false},
	} {
		name := tc.mode.String() + "/" + tc.name
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mode := tc.mode
			const runs = 200
			base := &firstDraftRefused{noticeFirst: newNoticeFirst(), after: 5 * time.Millisecond,
				refuse: map[string]bool{}, refused: make(chan string, 1)}
			var p connector.Platform = firstDraftRefusedStream{base}
			if mode == connector.ModeEdit {
				p = firstDraftRefusedEdit{base}
			}
			_, url := startKit(t, p, "", connector.Options{Mode: mode,
				Pace: connector.Pace{MaxAttempts: tc.attempts}})
			a := newAgent()
			xc, ch := a.dialResending(t, url, time.Millisecond)
			ctx := context.Background()
			var sent []string
			for range runs {
				ra, rb := newReply(t, xc, ch), newReply(t, xc, ch)
				if tc.refuse {
					base.expect(ra.MessageID())
				}
				require.NoError(t, ra.Delta(ctx, "A says"))
				if tc.refuse {
					select { // A's first draft waits out its Retry-After
					case <-base.refused:
					case <-time.After(10 * time.Second): // a hang guard: no first draft came
						t.Fatalf("run %d: A's first draft never reached the platform", len(sent)/2)
					}
				}
				require.NoError(t, rb.Delta(ctx, "B says"))
				require.NoError(t, final(ctx, ra, imv2.ChatMessage{Text: "A says hi"}))
				require.NoError(t, final(ctx, rb, imv2.ChatMessage{Text: "B says hi"}))
				sent = append(sent, ra.MessageID(), rb.MessageID())
				for range 2 {
					o := a.next(t)
					require.Nil(t, o.err, "message %s failed", o.id)
				}
			}
			got := base.order()
			reordered := 0
			for i := 0; i+1 < len(sent); i += 2 {
				if idx(got, sent[i]) > idx(got, sent[i+1]) {
					reordered++
				}
			}
			require.Zero(t, reordered, "runs of %d where B showed above A, whose first delta came first", runs)
			require.Equal(t, sent, got, "every message shown once, in send order")
		})
	}
}
