package imv2test_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/testcard"
	"github.com/xagentkit/imv2/sim"
)

// shownChat keeps the text of every final it posts, in order.
type shownChat struct {
	mu    sync.Mutex
	shown []string
}

func (c *shownChat) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shown = append(c.shown, m.Text)
	return nil
}

// TestStartSim_W1_A5_KitAndSimulatorOverLoopback: StartSim serves a kit
// Connector that requires an API key and dials it with that key taken
// from the kit; the finals the simulator sends are acked and shown in
// order.
func TestStartSim_W1_A5_KitAndSimulatorOverLoopback(t *testing.T) {
	t.Parallel()
	chat := &shownChat{}
	k, err := connector.New(testcard.IM("shown", "Shown"), chat, &connector.Options{APIKey: "startsim-test-key-0123456789abcdef"})
	require.NoError(t, err)
	agent := imv2test.StartSim(t, k, sim.Config{})
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("reply %d", i))
		require.NoError(t, agent.Reply(t.Context(), agent.ChannelID(), want[i]))
	}
	require.NoError(t, agent.WaitAcked(t.Context(), len(want)))
	chat.mu.Lock()
	defer chat.mu.Unlock()
	require.True(t, slices.Equal(chat.shown, want), "shown %q, want %q", chat.shown, want)
}
