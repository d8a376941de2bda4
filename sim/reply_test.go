package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testcard"
	"github.com/xagentkit/imv2/sim"
)

// fullSignal is a pending store that reports when it refused an Add as
// full, so a test knows the simulator hit the cap.
type fullSignal struct {
	imv2.PendingStore
	once sync.Once
	full chan struct{}
}

func (f *fullSignal) Add(ctx context.Context, e imv2.PendingEntry) error {
	err := f.PendingStore.Add(ctx, e)
	if errors.Is(err, &imv2.Error{Code: imv2.CodePendingFull}) {
		f.once.Do(func() { close(f.full) })
	}
	return err
}

// TestReply_S1_WaitsForRoomWhenPendingFull: with a pending cap of 2 and a
// Connector that holds every final until released, the third Reply finds
// the store full; it waits for an ack instead of failing pending_full,
// and all ten finals are delivered in order once the Connector answers.
func TestReply_S1_WaitsForRoomWhenPendingFull(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gate := make(chan struct{})
	var (
		mu    sync.Mutex
		shown []string
	)
	card := testcard.IM("simtest", "sim test")
	srv, err := dataplane.NewServer(dataplane.ServerConfig{Card: card,
		NewTarget: func(string) imv2.Target {
			return imv2.TargetFunc(func(ctx context.Context, _ string, m *imv2.ChatMessage) error {
				select {
				case <-gate:
				case <-ctx.Done():
					return imv2.NotPosted(ctx.Err())
				}
				mu.Lock()
				shown = append(shown, m.Text)
				mu.Unlock()
				return nil
			})
		}})
	require.NoError(t, err)
	h, err := connector.NewHandler(connector.HandlerConfig{Card: card, WS: srv})
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer srv.Close()

	pending := &fullSignal{PendingStore: imv2.NewMemoryPendingStore(2), full: make(chan struct{})}
	delivered := make(chan string, 10)
	s, err := sim.Start(ctx, sim.Config{Connector: hs.URL, Options: &imv2.Options{Pending: pending,
		OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) { delivered <- m.Text }}})
	require.NoError(t, err)
	defer s.Close()

	sent := make(chan error, 1)
	go func() {
		for i := range 10 {
			if err := s.Reply(ctx, s.ChannelID(), fmt.Sprintf("reply %d", i)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	select {
	case <-pending.full:
	case err := <-sent:
		t.Fatalf("the replies ended before the store was full: %v", err)
	}
	close(gate)
	require.NoError(t, <-sent)
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("reply %d", i))
		select {
		case <-delivered:
		case <-ctx.Done():
			t.Fatalf("%d of 10 finals delivered", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, shown)
}

// TestWaitAcked_A5_ReturnsWhenTheFinalsAreAcked: a Connector holds every
// final until released; WaitAcked(ctx, 3) after three Replies blocks
// while they are held, returns once all three are shown, and fails with
// the refusal when the Connector refuses one for good.
func TestWaitAcked_A5_ReturnsWhenTheFinalsAreAcked(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gate := make(chan struct{})
	var shown []string
	var mu sync.Mutex
	card := testcard.IM("simtest", "sim test")
	srv, err := dataplane.NewServer(dataplane.ServerConfig{Card: card,
		NewTarget: func(string) imv2.Target {
			return imv2.TargetFunc(func(ctx context.Context, _ string, m *imv2.ChatMessage) error {
				select {
				case <-gate:
				case <-ctx.Done():
					return imv2.NotPosted(ctx.Err())
				}
				if m.Text == "refuse" {
					return imv2.Refused(errors.New("no"))
				}
				mu.Lock()
				shown = append(shown, m.Text)
				mu.Unlock()
				return nil
			})
		}})
	require.NoError(t, err)
	h, err := connector.NewHandler(connector.HandlerConfig{Card: card, WS: srv})
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer srv.Close()
	s, err := sim.Start(ctx, sim.Config{Connector: hs.URL})
	require.NoError(t, err)
	defer s.Close()

	for i := range 3 {
		require.NoError(t, s.Reply(ctx, s.ChannelID(), fmt.Sprintf("reply %d", i)))
	}
	held, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	require.ErrorIs(t, s.WaitAcked(held, 3), context.DeadlineExceeded, "returned while the finals were held")
	close(gate)
	require.NoError(t, s.WaitAcked(ctx, 3))
	mu.Lock()
	require.Equal(t, []string{"reply 0", "reply 1", "reply 2"}, shown)
	mu.Unlock()

	require.NoError(t, s.Reply(ctx, s.ChannelID(), "refuse"))
	require.ErrorContains(t, s.WaitAcked(ctx, 4), "refused")
}
