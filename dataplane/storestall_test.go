package dataplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
)

// stall makes the store calls of one channel hang until released (or
// their context ends), as a locked table does; other channels' calls
// pass.
type stall struct {
	mu      sync.Mutex
	channel string
	release chan struct{}
	entered chan string
}

func newStall() *stall {
	return &stall{release: make(chan struct{}), entered: make(chan string, 16)}
}

func (s *stall) block(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channel = channel
}

func (s *stall) wait(ctx context.Context, channel string) {
	s.mu.Lock()
	hit := channel == s.channel
	s.mu.Unlock()
	if !hit {
		return
	}
	s.entered <- channel
	select {
	case <-s.release:
	case <-ctx.Done():
	}
}

// stallCompleted is a completed store whose Lookup stalls.
type stallCompleted struct {
	imv2.ClaimStore
	*stall
}

func (s stallCompleted) Lookup(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, bool, error) {
	s.wait(ctx, channelID)
	return s.ClaimStore.Lookup(ctx, channelID, messageID)
}

// stallPending is a pending store whose Remove stalls.
type stallPending struct {
	imv2.PendingStore
	*stall
}

func (s stallPending) Remove(ctx context.Context, channelID, messageID string) error {
	s.wait(ctx, channelID)
	return s.PendingStore.Remove(ctx, channelID, messageID)
}

func pendingOf(t *testing.T, ch *imv2.Channel) int {
	p, err := ch.Pending(context.Background())
	require.NoError(t, err)
	return len(p)
}

// TestStoreStall_D11_S1_SlowStoreHoldsOnlyItsChannel: two channels on one
// connection; the stores stall for channel a only, as a table lock on its
// rows would. The Connector's completed-store Lookup of a's first delta
// (D11) and xAgent's pending-store Remove after a's ack (S1) stall, and
// channel b's finals are still posted and acknowledged meanwhile: no
// store call runs on the connection's reader. Once released, a settles.
// (The old code made both calls on the reader: b's final waited for the
// stalled call, past this test's wait.)
func TestStoreStall_D11_S1_SlowStoreHoldsOnlyItsChannel(t *testing.T) {
	completed, pending := newStall(), newStall()
	target := newRecTarget()
	_, url := startServer(t, func(cfg *ServerConfig) {
		cfg.NewTarget = func(string) imv2.Target { return target }
		cfg.Options = &imv2.Options{Completed: stallCompleted{imv2.NewMemoryCompletedStore(0, 0, nil), completed}}
	})
	c, _, events := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Options = &imv2.Options{Clock: clock.System{}, Pending: stallPending{imv2.NewMemoryPendingStore(0), pending}}
	})
	recv(t, events)
	ctx := ctxWait(t)
	a, err := c.OpenChannel(ctx, "")
	require.NoError(t, err)
	b, err := c.OpenChannel(ctx, "")
	require.NoError(t, err)
	var once sync.Once
	unstall := func() {
		once.Do(func() {
			close(completed.release)
			close(pending.release)
		})
	}
	t.Cleanup(unstall) // before the client and server close

	// The Connector's Lookup of a's first delta stalls.
	completed.block(a)
	ra, err := c.NewReply(a, "r-a")
	require.NoError(t, err)
	require.NoError(t, ra.Delta(ctx, "hel"))
	require.Equal(t, a, recv(t, completed.entered))
	_, err = c.Send(ctx, b, imv2.ChatMessage{MessageID: "f-b1", Text: "b goes on"})
	require.NoError(t, err)
	require.Equal(t, "f-b1", target.next(t).MessageID, "b's final is posted while a's Lookup stalls")
	require.Eventually(t, func() bool { return pendingOf(t, c.engine(b)) == 0 }, wait, time.Millisecond, "and acknowledged")
	// a's reply ends: its final (a claim, not a Lookup) is posted while
	// the Lookup of its first delta still stalls. A final sent on a after
	// it waits for it (the order rule), so it comes first.
	_, err = ra.Final(ctx, imv2.ChatMessage{Text: "hello"})
	require.NoError(t, err)
	require.Equal(t, "r-a", target.next(t).MessageID)
	require.Eventually(t, func() bool { return pendingOf(t, c.engine(a)) == 0 }, wait, time.Millisecond, "and acknowledged")

	// xAgent's Remove after a's ack stalls.
	pending.block(a)
	_, err = c.Send(ctx, a, imv2.ChatMessage{MessageID: "f-a1", Text: "a"})
	require.NoError(t, err)
	require.Equal(t, "f-a1", target.next(t).MessageID)
	require.Equal(t, a, recv(t, pending.entered))
	_, err = c.Send(ctx, b, imv2.ChatMessage{MessageID: "f-b2", Text: "b still goes on"})
	require.NoError(t, err)
	require.Equal(t, "f-b2", target.next(t).MessageID)
	require.Eventually(t, func() bool { return pendingOf(t, c.engine(b)) == 0 }, wait, time.Millisecond, "b's ack is read while a's Remove stalls")
	require.Equal(t, 1, pendingOf(t, c.engine(a)), "a's entry waits for its Remove")

	unstall()
	require.Eventually(t, func() bool { return pendingOf(t, c.engine(a)) == 0 }, wait, time.Millisecond, "a's Remove completes once the store answers")
}
