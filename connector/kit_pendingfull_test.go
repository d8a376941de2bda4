package connector_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/state"
)

// fullStore is a Store whose pending store is full while full is set:
// Add refuses with pending_full and reports the message_id on tries.
type fullStore struct {
	state.Store
	full  atomic.Bool
	tries chan string
}

func (s *fullStore) Add(ctx context.Context, e imv2.PendingEntry) error {
	if s.full.Load() {
		s.tries <- e.Message.MessageID
		return imv2.Errorf(imv2.CodePendingFull, "channel %q is full", e.ChannelID)
	}
	return s.Store.Add(ctx, e)
}

// inOrder is an xAgent that records the user messages it takes, in order.
type inOrder struct {
	mu  sync.Mutex
	ids []string
}

func (a *inOrder) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, m.MessageID)
	return nil
}

func (a *inOrder) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

// TestKit_S10_ReceiveWaitsForRoomInThePendingStore: while a channel's
// pending store is full, Receive waits (on the kit's clock, 20 ms
// doubling) instead of failing with pending_full, so a reader that hands
// events one after another needs no loop of its own: once room frees, the
// waiting event and the ones after it reach xAgent once each, in order.
// One line is logged when the wait starts and one when it ends. A waiting
// Receive returns when its context ends, or when the Connector closes,
// with an error matching both that end and pending_full.
func TestKit_S10_ReceiveWaitsForRoomInThePendingStore(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New(epoch)
	st := &fullStore{Store: connector.NewMemoryStore(clk), tries: make(chan string, 64)}
	logs := new(syncBuffer)
	k, url := startKit(t, newPretend(0), "", connector.Options{
		Store: st, DefaultConversation: func(string) string { return "room-1" },
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Advanced: connector.Advanced{Clock: clk},
	})
	a := &inOrder{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: a})
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.OpenChannel(ctx, "")
	require.NoError(t, err)

	ev := func(n string) connector.InboundEvent {
		return connector.InboundEvent{Conversation: "room-1", EventID: n, Text: "message " + n}
	}
	id := func(n string) string { return connector.EventMessageID("room-1", n) }
	st.full.Store(true)
	done := make(chan error, 3)
	go func() {
		for _, n := range []string{"1", "2", "3"} {
			err := k.Receive(ctx, ev(n))
			done <- err
			if err != nil {
				return
			}
		}
	}()
	select {
	case got := <-st.tries:
		require.Equal(t, id("1"), got)
	case err := <-done:
		t.Fatalf("Receive: %v", err)
	}
	for range 3 { // the clock past the backoff: one more try
		require.Equal(t, id("1"), advanceUntil(t, clk, st.tries))
	}
	select {
	case err := <-done:
		t.Fatalf("Receive returned while the pending store was full: %v", err)
	default:
	}
	st.full.Store(false)
	require.NoError(t, advanceUntil(t, clk, done))
	for range 2 {
		require.NoError(t, testwait.Recv(t, (<-chan error)(done), 10*time.Second))
	}
	require.Eventually(t, func() bool { return len(a.got()) >= 3 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{id("1"), id("2"), id("3")}, a.got(), "once each, in order")
	require.Equal(t, 1, strings.Count(logs.String(), "pending store is full"), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "has room again"), logs.String())

	// The caller's context ends the wait.
	for len(st.tries) > 0 { // the tries of "1" the Advances made
		<-st.tries
	}
	st.full.Store(true)
	cctx, ccancel := context.WithCancel(ctx)
	go func() { done <- k.Receive(cctx, ev("4")) }()
	require.Equal(t, id("4"), testwait.Recv(t, (<-chan string)(st.tries), 10*time.Second))
	ccancel()
	err = testwait.Recv(t, (<-chan error)(done), 10*time.Second)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodePendingFull})

	// So does Close.
	go func() { done <- k.Receive(ctx, ev("5")) }()
	require.Equal(t, id("5"), testwait.Recv(t, (<-chan string)(st.tries), 10*time.Second))
	go k.Close()
	err = testwait.Recv(t, (<-chan error)(done), 10*time.Second)
	require.ErrorIs(t, err, imv2.ErrClosed)
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodePendingFull})
	require.Equal(t, []string{id("1"), id("2"), id("3")}, a.got())
}

// advanceUntil advances clk a second at a time until ch yields: a waiter
// may set its timer just after an Advance.
func advanceUntil[T any](t *testing.T, clk *fakeclock.Clock, ch <-chan T) T {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		clk.Advance(time.Second)
		select {
		case v := <-ch:
			return v
		case <-time.After(5 * time.Millisecond): // wall time only to let the waiter set its timer
		}
	}
	t.Fatalf("nothing came within 10s of advancing the clock")
	var zero T
	return zero
}
