package dataplane

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
)

// seqAgent records the user messages xAgent's Target got, in order.
type seqAgent struct {
	mu  sync.Mutex
	ids []string
	n   int
	all chan struct{}
}

func (a *seqAgent) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, m.MessageID)
	if len(a.ids) == a.n {
		close(a.all)
	}
	return nil
}

func (a *seqAgent) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

// TestServer_S2_UserMessagesInOrderPastTheWindow: 100 user messages handed
// one after another to a bare Server channel's Send reach xAgent's Target
// in the order taken, though more than the send window (64) are in
// flight at once, over a real WebSocket.
func TestServer_S2_UserMessagesInOrderPastTheWindow(t *testing.T) {
	const n = 100
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("u%03d", i+1)
	}
	trials := 20
	if testing.Short() {
		trials = 3
	}
	bad := 0
	for trial := range trials {
		agent := &seqAgent{n: n, all: make(chan struct{})}
		srv, url := startServer(t, nil)
		cli, _, events := dialClient(t, url, func(c *ClientConfig) { c.Target = agent })
		recv(t, events)
		ctx := ctxWait(t)
		xch, err := cli.OpenChannel(ctx, "")
		require.NoError(t, err)
		sch := srv.Channel(xch)
		for _, id := range want {
			_, err := sch.Send(ctx, imv2.ChatMessage{MessageID: id, Text: "hi"})
			require.NoError(t, err)
		}
		recv(t, agent.all)
		if got := agent.got(); fmt.Sprint(got) != fmt.Sprint(want) {
			bad++
			t.Logf("trial %d out of order: %v", trial, got[:70])
		}
	}
	require.Zero(t, bad, "%d of %d trials out of order", bad, trials)
}
