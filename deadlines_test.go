package imv2

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeadlines_S2_OneTimerPerChannel: however many messages are pending,
// a channel holds one timer for their ack timeouts; each message still
// times out at its own time, in sending order; the last ack leaves no
// timer.
func TestDeadlines_S2_OneTimerPerChannel(t *testing.T) {
	c, w, clk := newConnector(t, newRecTarget(), &Options{AckTimeout: 10 * time.Second, RetryMin: time.Hour, RetryMax: time.Hour})
	ctx := context.Background()
	const n = 50
	sent := make([]*Packet, 0, n)
	for range n {
		_, err := c.Send(ctx, ChatMessage{Text: "x"})
		require.NoError(t, err)
		sent = append(sent, w.next(t))
		clk.Advance(100 * time.Millisecond) // staggered ack deadlines
	}
	require.Equal(t, 1, clk.Pending(), "one timer for %d pending messages", n)

	// Ack the first half: the timer stays one; the others still time out.
	for _, p := range sent[:n/2] {
		require.NoError(t, c.Receive(ctx, ackFor(t, p, AckAccepted, nil)))
	}
	require.LessOrEqual(t, clk.Pending(), 1)
	clk.Advance(10 * time.Second) // every remaining ack timeout passed: each is rescheduled after a backoff
	c.mu.Lock()
	require.Len(t, c.out, n/2)
	for _, p := range sent[n/2:] {
		o := c.out[mustMessageID(t, p)]
		require.NotNil(t, o)
		require.Equal(t, stepTransmit, o.step, "timed out and waiting for its resend")
	}
	c.mu.Unlock()
	require.Equal(t, 1, clk.Pending())
	w.none(t)

	for _, p := range sent[n/2:] {
		require.NoError(t, c.Receive(ctx, ackFor(t, p, AckAccepted, nil)))
	}
	// The timer is kept (a channel sending one message at a time does not
	// stop and make one per message): it fires once, finds nothing and is
	// not armed again.
	require.LessOrEqual(t, clk.Pending(), 1)
	clk.Advance(time.Hour)
	require.Zero(t, clk.Pending(), "no pending message, no timer once it fired")
	w.none(t)
}

func mustMessageID(t *testing.T, p *Packet) string {
	t.Helper()
	m, err := DecodeChatMessage(p, ToXAgent)
	require.NoError(t, err)
	return m.MessageID
}
