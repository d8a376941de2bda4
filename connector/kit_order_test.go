package connector_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
)

// outage is a chat service whose first fail posts are refused with a
// short Retry-After (not applied); then it shows every post.
type outage struct {
	fail int

	mu    sync.Mutex
	posts int
	shown []string
}

func (p *outage) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	if p.posts <= p.fail {
		return imv2.RetryAfter(errors.New("503 Service Unavailable"), 10*time.Millisecond)
	}
	p.shown = append(p.shown, m.MessageID)
	return nil
}

func (p *outage) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.shown)
}

// TestKit_A8_M9_OrderHoldsBeyondTheRetryBudget: finals A, B, C sent at
// once, every platform call for A failing twice with a kit budget of two
// attempts: A is rejected retryable, B and C are answered channel_busy
// while A is unresolved, and xAgent's resends (the dataplane Client's
// Channel, A8) show them as A, B, C — not B, C, A.
func TestKit_A8_M9_OrderHoldsBeyondTheRetryBudget(t *testing.T) {
	t.Parallel()
	p := &outage{fail: 2}
	_, url := startKit(t, p, "", connector.Options{Pace: connector.Pace{MaxAttempts: 2}})
	a := newAgent()
	xc, ch := a.dial(t, url)
	var sent []string
	for _, text := range []string{"A", "B", "C"} {
		id, err := sendFinal(context.Background(), xc, ch, imv2.ChatMessage{Text: text})
		require.NoError(t, err)
		sent = append(sent, id)
	}
	for range sent {
		o := a.next(t)
		require.Nil(t, o.err, "final %s failed", o.id)
		require.Equal(t, imv2.AckAccepted, o.status)
	}
	require.Equal(t, sent, p.got(), "finals shown in the order sent")
}
