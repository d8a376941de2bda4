package connector_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
)

// noticeFirst is a chat service that refuses the first post of every
// final-only notice (text "notice…") with a short Retry-After, then
// shows it; every draft, temporary post, edit and final is logged by
// message ID in the order the chat shows it.
type noticeFirst struct {
	mu      sync.Mutex
	refused map[string]bool
	shown   []string // message IDs, one per first appearance in the chat
	seen    map[string]bool
}

func newNoticeFirst() *noticeFirst {
	return &noticeFirst{refused: map[string]bool{}, seen: map[string]bool{}}
}

func (p *noticeFirst) show(id string) {
	if !p.seen[id] {
		p.seen[id] = true
		p.shown = append(p.shown, id)
	}
}

func (p *noticeFirst) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.HasPrefix(m.Text, "notice") && !p.refused[m.MessageID] {
		p.refused[m.MessageID] = true
		return imv2.RetryAfter(errors.New("429 Too Many Requests"), 2*time.Millisecond)
	}
	p.show(m.MessageID)
	return nil
}

func (p *noticeFirst) Finish(ctx context.Context, to connector.Conversation, _ string, m *connector.Message) error {
	return p.Post(ctx, to, m)
}

func (p *noticeFirst) order() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.shown...)
}

// noticeFirstStream adds a native draft API (mode stream).
type noticeFirstStream struct{ *noticeFirst }

func (p noticeFirstStream) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.show(d.MessageID)
	return d.MessageID, nil
}

// noticeFirstEdit adds a temporary message it edits (mode edit).
type noticeFirstEdit struct{ *noticeFirst }

func (p noticeFirstEdit) PostDraft(_ context.Context, _ connector.Conversation, messageID, _ string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.show(messageID)
	return messageID, nil
}

func (noticeFirstEdit) Edit(context.Context, connector.Conversation, string, string) error {
	return nil
}

// TestKit_M14_D8_FirstDraftWaitsForEarlierFinals is the reorder repro of
// issue 24: a final-only notice whose first post is rate-limited, then a
// streamed answer on the same channel. The answer's first draft is its
// place in the chat, so it must not appear before the notice: 200 of 200
// runs, in modes stream and edit, with the notice posted again within the
// kit's retry budget ("retried") and beyond it ("resent": MaxAttempts 1,
// rejected retryable and sent again by xAgent, A8).
func TestKit_M14_D8_FirstDraftWaitsForEarlierFinals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     connector.Mode
		attempts int
		runs     int
	}{
		{connector.ModeStream, 0, 200}, {connector.ModeEdit, 0, 200},
		{connector.ModeStream, 1, 200}, {connector.ModeEdit, 1, 200},
	} {
		name := tc.mode.String() + "/retried"
		if tc.attempts == 1 {
			name = tc.mode.String() + "/resent"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mode, runs := tc.mode, tc.runs
			base := newNoticeFirst()
			var p connector.Platform = noticeFirstStream{base}
			if mode == connector.ModeEdit {
				p = noticeFirstEdit{base}
			}
			_, url := startKit(t, p, "", connector.Options{Mode: mode,
				Pace: connector.Pace{Backoff: time.Millisecond, MaxAttempts: tc.attempts}})
			a := newAgent()
			xc, ch := a.dialResending(t, url, time.Millisecond)
			ctx := context.Background()
			var sent []string
			for i := range runs {
				notice, err := sendFinal(ctx, xc, ch, imv2.ChatMessage{Text: "notice " + string(rune('a'+i%26))})
				require.NoError(t, err)
				r := newReply(t, xc, ch)
				require.NoError(t, r.Delta(ctx, "The answer"))
				require.NoError(t, r.Delta(ctx, " is 42"))
				require.NoError(t, final(ctx, r, imv2.ChatMessage{Text: "The answer is 42."}))
				sent = append(sent, notice, r.MessageID())
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
			require.Zero(t, reordered, "runs of %d where the answer showed above the notice sent before it", runs)
			require.Equal(t, sent, got, "every message shown once, in send order")
		})
	}
}

// dialResending is dial with xAgent resending a rejected message after
// retry (doubling to 4×retry).
func (a *agent) dialResending(t *testing.T, url string, retry time.Duration) (*dataplane.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: url, Target: a,
		Options: &imv2.Options{
			RetryMin: retry, RetryMax: 4 * retry,
			OnDelivered: func(_ string, m imv2.ChatMessage, s imv2.AckStatus) { a.outcome <- outcome{id: m.MessageID, status: s} },
			OnFailed:    func(_ string, m imv2.ChatMessage, err *imv2.Error) { a.outcome <- outcome{id: m.MessageID, err: err} },
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ch, err := c.OpenChannel(ctx, "")
	require.NoError(t, err)
	return c, ch
}

func idx(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return len(s)
}
