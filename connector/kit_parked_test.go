package connector_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/testwait"
)

// TestKit_S10_ReceiveBeforeReopenIsKeptUntilIt: after a Connector restart a
// bound channel is not open until xAgent reopens it. An event received
// then is not refused with ErrNoChannel (which would repeat for ever: the
// registry cannot list the channel, so no offline grace starts for it): it
// is kept in the durable pending store and delivered, once, when xAgent
// reopens the channel; a replay before that is skipped.
func TestKit_S10_ReceiveBeforeReopenIsKeptUntilIt(t *testing.T) {
	t.Parallel()
	rk := startRestartable(t, func(st *boltstore.Store) (*connector.Connector, error) {
		return connector.New(kitCard(""), editOnly(make(chan string, 64)), &connector.Options{
			Store: st, DefaultConversation: func(string) string { return "room-1" },
		})
	})
	a := newAgent()
	cl, ch := a.dial(t, rk.URL())
	chID := ch
	require.NoError(t, cl.Close()) // xAgent is away across the restart
	rk.stop()
	rk.restart()
	defer rk.stop()

	ctx := context.Background()
	ev := connector.InboundEvent{Conversation: "room-1", EventID: "ev-1", Text: "written while the channel was closed"}
	require.NoError(t, rk.K.Receive(ctx, ev), "a bound channel not reopened yet keeps the message")
	require.NoError(t, rk.K.Receive(ctx, ev), "a replay is skipped, not refused")

	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl2, err := dataplane.Dial(dctx, dataplane.ClientConfig{URL: rk.URL(), Target: a})
	require.NoError(t, err)
	defer cl2.Close()
	_, err = cl2.OpenChannel(dctx, chID)
	require.NoError(t, err)
	id := connector.EventMessageID("room-1", "ev-1")
	a.users.wait(t, id, 1)
	require.Equal(t, 1, a.count(id))
}

// TestKit_S10_ParkedMessageFailsAfterTheGrace: a message kept for a bound
// channel that xAgent does not reopen within the offline grace fails once,
// with code expired and a reason naming the channel, and leaves the store.
func TestKit_S10_ParkedMessageFailsAfterTheGrace(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New(time.Now())
	failed := make(chan *imv2.Error, 4)
	rk := startRestartable(t, func(st *boltstore.Store) (*connector.Connector, error) {
		return connector.New(kitCard(""), editOnly(make(chan string, 64)), &connector.Options{
			Store: st, DefaultConversation: func(string) string { return "room-1" },
			Advanced: connector.Advanced{Clock: clk, OfflineGrace: time.Hour, Channel: &imv2.Options{
				OnFailed: func(_ string, _ imv2.ChatMessage, err *imv2.Error) { failed <- err },
			}},
		})
	})
	a := newAgent()
	cl, ch := a.dial(t, rk.URL())
	chID := ch
	require.NoError(t, cl.Close())
	rk.stop()
	rk.restart()
	defer rk.stop()

	ctx := context.Background()
	require.NoError(t, rk.K.Receive(ctx, connector.InboundEvent{Conversation: "room-1", EventID: "ev-1", Text: "hello?"}))
	pending, err := rk.Bolt.List(ctx, chID)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	clk.Advance(time.Hour)
	fail := testwait.Recv(t, (<-chan *imv2.Error)(failed), 10*time.Second)
	require.Equal(t, imv2.CodeExpired, fail.Code)
	require.Contains(t, fail.Message, chID)
	pending, err = rk.Bolt.List(ctx, chID)
	require.NoError(t, err)
	require.Empty(t, pending)
	select {
	case again := <-failed:
		t.Fatalf("a second failure: %v", again)
	default:
	}
}

// TestKit_S10_CloseStopsTheParkedGrace: Close stops the grace timer of a
// channel with parked messages; the messages stay in the store for the
// next start.
func TestKit_S10_CloseStopsTheParkedGrace(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New(time.Now())
	rk := startRestartable(t, func(st *boltstore.Store) (*connector.Connector, error) {
		return connector.New(kitCard(""), editOnly(make(chan string, 64)), &connector.Options{
			Store: st, DefaultConversation: func(string) string { return "room-1" },
			Advanced: connector.Advanced{Clock: clk},
		})
	})
	a := newAgent()
	cl, ch := a.dial(t, rk.URL())
	require.NoError(t, cl.Close())
	rk.stop()
	rk.restart()
	ctx := context.Background()
	before := clk.Pending()
	require.NoError(t, rk.K.Receive(ctx, connector.InboundEvent{Conversation: "room-1", EventID: "ev-1", Text: "hello?"}))
	require.Equal(t, before+1, clk.Pending(), "the parked message's grace runs")
	require.NoError(t, rk.K.Close())
	require.Zero(t, clk.Pending(), "Close stops every timer, the grace too")
	pending, err := rk.Bolt.List(ctx, ch)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the parked message stays for the next start")
	rk.stop()
}
