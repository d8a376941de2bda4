package connector_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
)

// firstSeen is a chat that logs each message ID when it first appears:
// its first draft, temporary message or final.
type firstSeen struct {
	mu    sync.Mutex
	seen  map[string]bool
	order []string
}

func (p *firstSeen) show(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if !p.seen[id] {
		p.seen[id] = true
		p.order = append(p.order, id)
	}
}

func (p *firstSeen) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

func (p *firstSeen) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.show(m.MessageID)
	return nil
}

// seenStream has a native draft API (mode stream).
type seenStream struct{ *firstSeen }

func (p seenStream) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	p.show(d.MessageID)
	return d.MessageID, nil
}

// seenEdit posts a temporary message it edits (modes edit and buffer).
type seenEdit struct{ *firstSeen }

func (p seenEdit) PostDraft(_ context.Context, _ connector.Conversation, messageID, _ string) (string, error) {
	p.show(messageID)
	return messageID, nil
}

func (seenEdit) Edit(context.Context, connector.Conversation, string, string) error { return nil }

// TestKit_M14_OverlappingRepliesShowInTheOrderTheyStarted is the repro of
// issue 35: xAgent sends A.delta, B.delta, A.delta, B.delta, B.final,
// A.final back to back. The replies show in the order they started, A
// then B, in every mode, with and without a rate limit: 20 rounds each,
// none out of order.
func TestKit_M14_OverlappingRepliesShowInTheOrderTheyStarted(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"stream", "edit", "buffer", "post-only"} {
		for _, limited := range []bool{false, true} {
			name := mode
			if limited {
				name += "/rate-limited"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				base := &firstSeen{}
				var p connector.Platform = base
				opts := connector.Options{}
				switch mode {
				case "stream":
					p = seenStream{base}
				case "edit":
					p = seenEdit{base}
				case "buffer":
					p, opts.Mode = seenEdit{base}, connector.ModeBuffer
				}
				if limited {
					opts.Pace = connector.Pace{PerConversation: 500, ConversationBurst: 1}
				}
				_, url := startKit(t, p, "", opts)
				a := newAgent()
				xc, ch := a.dial(t, url)
				ctx := context.Background()
				const rounds = 20
				bad := 0
				var want []string
				for range rounds {
					ra, rb := newReply(t, xc, ch), newReply(t, xc, ch)
					require.NoError(t, ra.Delta(ctx, "A1"))
					require.NoError(t, rb.Delta(ctx, "B1"))
					require.NoError(t, ra.Delta(ctx, "A2"))
					require.NoError(t, rb.Delta(ctx, "B2"))
					require.NoError(t, final(ctx, rb, imv2.ChatMessage{Text: "B1B2."}))
					require.NoError(t, final(ctx, ra, imv2.ChatMessage{Text: "A1A2."}))
					for range 2 {
						o := a.next(t)
						require.Nil(t, o.err, "message %s failed", o.id)
					}
					want = append(want, ra.MessageID(), rb.MessageID())
					got := base.got()
					if idx(got, ra.MessageID()) > idx(got, rb.MessageID()) {
						bad++
					}
				}
				require.Zero(t, bad, "rounds of %d where B showed before A", rounds)
				require.Equal(t, want, base.got(), "every reply shown once, in the order they started")
			})
		}
	}
}
