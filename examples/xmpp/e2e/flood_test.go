//go:build unix

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
)

// heldXAgent is an xAgent that takes no user message (its Target call
// waits) until released: the Connector's pending store for the channel
// fills to its cap (1,000) and stays full.
type heldXAgent struct {
	release chan struct{}

	mu    sync.Mutex
	texts map[string]string // by message_id
	order []string          // texts, in the order they were first taken
}

func newHeldXAgent() *heldXAgent {
	return &heldXAgent{release: make(chan struct{}), texts: map[string]string{}}
}

func (h *heldXAgent) PostMessage(ctx context.Context, _ string, m *imv2.ChatMessage) error {
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.texts[m.MessageID]; !ok {
		h.texts[m.MessageID] = m.Text
		h.order = append(h.order, m.Text)
	}
	return nil
}

func (h *heldXAgent) taken() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.order...)
}

// waitTaken waits until n distinct user messages were taken, or until
// none came for idle (then the count is what it is).
func (h *heldXAgent) waitTaken(t *testing.T, n int, idle time.Duration) []string {
	t.Helper()
	last, since := -1, time.Now()
	for {
		got := h.taken()
		if len(got) >= n {
			return got
		}
		if len(got) != last {
			last, since = len(got), time.Now()
		} else if time.Since(since) > idle {
			t.Logf("no user message for %v; xAgent has %d of %d", idle, len(got), n)
			return got
		}
		time.Sleep(20 * time.Millisecond) // polling another process's output, not timing
	}
}

// dialHeld connects a held xAgent to the Connector at addr and opens one
// channel.
func dialHeld(t *testing.T, ctx context.Context, addr string, h *heldXAgent) *dataplane.Client {
	t.Helper()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: "http://" + addr, APIKey: apiKey, Target: h,
		Options:  &imv2.Options{TargetTimeout: 5 * time.Minute},
		Advanced: dataplane.ClientAdvanced{CardID: xmppbridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	_, err = cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	return cli
}

// fastResend makes the Connector's Channel resend what xAgent refused
// (channel_busy while its Target waits) within a fraction of a second, so
// the test's drain after the release is quick.
func fastResend(c *xmppbridge.Config) {
	c.Channel.RetryMin, c.Channel.RetryMax = 20*time.Millisecond, 300*time.Millisecond
}

// TestFlood_NoUserMessageLostWhilePendingIsFull: xAgent takes nothing
// while alice sends 1,500 messages in a 1:1 chat, 500 more than the
// channel's pending cap. Once xAgent takes them again, all 1,500 reach
// it, once each: the bridge's reader waited for room (and read what it
// could not hold from the server's archive) instead of dropping. Before,
// 500 of 1,500 were dropped with a log line.
func TestFlood_NoUserMessageLostWhilePendingIsFull(t *testing.T) {
	const n = 1500
	p := startProsody(t)
	alice := newUser(t, p)
	addr, logs := freeAddr(t), &lines{}
	conn := startConnector(t, p, addr, aliceJID, "", logs, fastResend)
	defer conn.stop(t)
	ctx := ctxFor(t)
	h := newHeldXAgent()
	dialHeld(t, ctx, addr, h)
	require.NoError(t, conn.b.Reading(ctx))

	for i := range n {
		alice.say(botJID, "chat", fmt.Sprintf("m%04d", i))
	}
	alice.waitFor("the bot reading all of them", func() bool { return logs.count("xmppbridge: message read") >= n })
	close(h.release)
	got := h.waitTaken(t, n, 20*time.Second)
	t.Logf("user messages at xAgent: %d of %d; bridge log lines about messages not handed over: %d",
		len(got), n, logs.count("not handed to xAgent"))
	require.Equal(t, n, len(got), "every user message reaches xAgent once it takes them")
	require.Positive(t, logs.count("messages read from the archive"), "what the reader could not hold came from the archive")
}

// TestFlood_RoomOccupantFloodDropsNoOtherOccupantsMessage: in a room,
// mallory floods 1,200 messages while xAgent takes nothing; alice says
// three things once the bot has read the flood. Once xAgent takes messages
// again, every one of alice's has reached it (and every one of
// mallory's): a flood delays others' messages but pushes none out.
// Before, everything past the pending cap was dropped, alice's included.
func TestFlood_RoomOccupantFloodDropsNoOtherOccupantsMessage(t *testing.T) {
	const flood = 1200
	p := startProsody(t)
	alice := newUser(t, p)
	alice.join(room, "alice")
	mallory := newUserAs(t, p, malloryJID, malloryPass)
	mallory.join(room, "mallory")
	addr, logs := freeAddr(t), &lines{}
	conn := startConnector(t, p, addr, room+"?join", "", logs, fastResend)
	defer conn.stop(t)
	ctx := ctxFor(t)
	h := newHeldXAgent()
	dialHeld(t, ctx, addr, h)
	require.NoError(t, conn.b.Reading(ctx))
	alice.waitFor("the bot in the room", func() bool { return len(alice.presences(room+"/bot")) > 0 })

	for i := range flood {
		mallory.say(room, "groupchat", fmt.Sprintf("flood %04d", i))
	}
	alice.waitFor("the bot reading the flood", func() bool { return logs.count("xmppbridge: message read") >= flood })
	mine := []string{"alice 0", "alice 1", "alice 2"}
	for _, s := range mine {
		alice.say(room, "groupchat", s)
	}
	alice.waitFor("the bot reading alice's", func() bool { return logs.count("xmppbridge: message read") >= flood+len(mine) })
	close(h.release)
	got := h.waitTaken(t, flood+len(mine), 20*time.Second)
	at := map[string]int{}
	for i, s := range got {
		at[s] = i
	}
	var lost []string
	last := 0
	for _, s := range mine {
		i, ok := at[s]
		if !ok {
			lost = append(lost, s)
		}
		last = max(last, i)
	}
	t.Logf("user messages at xAgent: %d of %d; alice's lost: %d of %d; her last taken as %d of %d", len(got), flood+len(mine), len(lost), len(mine), last+1, len(got))
	require.Empty(t, lost, "alice's messages pushed out by mallory's flood")
	require.Equal(t, flood+len(mine), len(got), "user messages at xAgent")
	// Fair: alice's share is served in turn with mallory's backlog, not
	// after all of it.
	require.Less(t, last, at[fmt.Sprintf("flood %04d", flood-1)], "alice's messages waited for the whole flood")
	require.Positive(t, logs.count("messages read from the archive"), "what the reader could not hold came from the archive")
}
