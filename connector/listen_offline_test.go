package connector_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/state"
)

// feedReader is a Listener that hands over the events the test feeds it.
type feedReader struct {
	*pretend
	started chan string
	feed    chan connector.InboundEvent
}

func (r *feedReader) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	r.started <- b.ChannelID
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.feed:
			if err := in.Receive(ctx, ev); err != nil {
				return err
			}
		}
	}
}

// TestKit_W5_DroppedConnectionKeepsTheReaderForTheReconnect: a channel
// whose connection dropped without channel.close keeps its reader for the
// offline grace (issue 26 asked whether it should stop at once; the
// grace exists so xAgent can reconnect, connector/listen.go). An event
// the reader hands over while xAgent is away reaches xAgent once when it
// reconnects with its connector_id and reopens the channel; a platform
// without history would lose it to a reader stopped at the drop.
func TestKit_W5_DroppedConnectionKeepsTheReaderForTheReconnect(t *testing.T) {
	p := &feedReader{pretend: newPretend(0), started: make(chan string, 4), feed: make(chan connector.InboundEvent)}
	k, url := startKit(t, p, "", connector.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := newAgent()
	connectorID := make(chan string, 4)
	cl, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: a,
		OnConnected: func(id string, _ []string) { connectorID <- id }})
	require.NoError(t, err)
	ch, err := cl.OpenChannel(ctx, "")
	require.NoError(t, err)
	chID, cid := ch, testwait.Recv(t, connectorID, 10*time.Second)
	require.Equal(t, chID, testwait.Recv(t, p.started, 10*time.Second))

	require.NoError(t, cl.Close()) // the connection drops; no channel.close
	require.Eventually(t, func() bool { return !k.Server().IsOpen(chID) }, 10*time.Second, 5*time.Millisecond)
	require.True(t, k.Listening(chID), "the reader outlives the dropped connection")
	ev := connector.InboundEvent{Conversation: chID, EventID: "while-away", Text: "written while xAgent was away"}
	select {
	case p.feed <- ev:
	case <-ctx.Done():
		t.Fatal("the reader took no event after the drop")
	}

	store := state.NewMemoryChannelStore(0)
	require.NoError(t, store.SetConnectorID(ctx, cid))
	require.NoError(t, store.AddChannel(ctx, chID))
	cl2, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: a, Store: store})
	require.NoError(t, err)
	defer cl2.Close()
	id := connector.EventMessageID(chID, ev.EventID)
	a.users.wait(t, id, 1)
	require.Equal(t, 1, a.count(id))
}
