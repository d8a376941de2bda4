package connector_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/state"
)

// idleReader is a Listener whose Listen reads nothing and waits for its
// context, counting the calls running.
type idleReader struct {
	*pretend
	running atomic.Int64
	started chan string
	ended   chan string
}

func (r *idleReader) Listen(ctx context.Context, b state.Binding, _ connector.Inbox) error {
	r.running.Add(1)
	r.started <- b.ChannelID
	<-ctx.Done()
	r.running.Add(-1)
	r.ended <- b.ChannelID
	return nil
}

// TestAttack_ListenStopsWithItsChannel (issue 26): xAgent churning
// channel.open and channel.close used to leave one Listen running per
// channel ever opened (8,000 after the reported churn, up to 64,000 by the
// caps). Over a real connection, 64 channels are opened and closed: every
// Listen ends with its channel.close, and a reopen starts the reader
// again. Before the fix no Listen ended (the wait for the first one fails).
func TestAttack_ListenStopsWithItsChannel(t *testing.T) {
	const channels = 64
	p := &idleReader{pretend: newPretend(0), started: make(chan string, channels*2), ended: make(chan string, channels*2)}
	_, url := startKit(t, p, "", connector.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: inbound(make(chan imv2.ChatMessage, 1))})
	require.NoError(t, err)
	defer cli.Close()

	ids := make([]string, 0, channels)
	for range channels {
		ch, err := cli.OpenChannel(ctx, "")
		require.NoError(t, err)
		ids = append(ids, ch)
		testwait.Recv(t, p.started, 10*time.Second)
		require.NoError(t, cli.CloseChannel(ctx, ch))
	}
	for range channels {
		testwait.Recv(t, p.ended, 10*time.Second)
	}
	require.Zero(t, p.running.Load(), "no Listen runs for a closed channel")

	_, err = cli.OpenChannel(ctx, ids[0]) // a reopen reads again
	require.NoError(t, err)
	require.Equal(t, ids[0], testwait.Recv(t, p.started, 10*time.Second))
	require.EqualValues(t, 1, p.running.Load())
}
