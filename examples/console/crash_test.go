package main

import (
	"context"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/sim"
)

// freeAddr returns a loopback address nobody listens on, so a restarted
// console can come back on the same port xAgent reconnects to.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// kill ends the console with SIGKILL: no shutdown code runs.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
	for range p.events { // drain what it printed before dying
	}
}

func finals(es []consolebridge.Event, id string) int {
	n := 0
	for _, e := range es {
		if e.Event == "final" && e.MessageID == id {
			n++
		}
	}
	return n
}

// retry calls f until it succeeds or the deadline passes (the client is
// reconnecting with backoff meanwhile).
func retry[T any](t *testing.T, f func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := f()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // waiting on another process, not on an SDK timer
	}
}

// TestCrash_S8_FinalNeverPostedTwiceAcrossSIGKILL: a final is posted and
// acked accepted, the console is killed, restarted on the same -store, and
// the same final is resent: it is answered duplicate, and the -json logs of
// both runs show exactly one final for that message_id.
func TestCrash_S8_FinalNeverPostedTwiceAcrossSIGKILL(t *testing.T) {
	store, addr := t.TempDir(), freeAddr(t)
	p := start(t, "-addr", addr, "-store", store)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: p.url, Options: &imv2.Options{RetryMax: time.Second}})
	require.NoError(t, err)
	defer agent.Close()
	ch := agent.ChannelID()

	require.NoError(t, agent.Reply(ctx, ch, "the answer is 42"))
	before := p.until(t, func(e consolebridge.Event) bool { return e.Event == "final" })
	final := agent.Finals()[0]
	require.NoError(t, agent.WaitAcked(ctx, 1), "accepted: nothing pending on the xAgent side")
	p.kill(t)

	p2 := start(t, "-addr", addr, "-store", store)
	ack := retry(t, func() (*imv2.ChatMessageAck, error) { return agent.Resend(ctx, ch, final) })
	require.Equal(t, imv2.AckDuplicate, ack.Status, "S8: the restarted Connector remembers the final")

	// One more message proves the restarted console is live and flushes its log.
	require.NoError(t, agent.Reply(ctx, ch, "still here"))
	after := p2.until(t, func(e consolebridge.Event) bool { return e.Event == "final" })
	require.Equal(t, 1, finals(before, final.MessageID)+finals(after, final.MessageID), "S8: one final across both runs")
}

// gate is an xAgent handler that takes user messages but does not return
// (so does not ack) until opened.
type gate struct {
	mu    sync.Mutex
	calls map[string]int
	open  chan struct{}
	seen  chan imv2.ChatMessage
}

func (g *gate) PostMessage(ctx context.Context, _ string, m *imv2.ChatMessage) error {
	g.mu.Lock()
	g.calls[m.MessageID]++
	g.mu.Unlock()
	g.seen <- *m
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestCrash_S1_PendingUserMessageSurvivesSIGKILL: a user line is typed, the
// console is killed before xAgent acks, and restarted: the message is resent
// with the same message_id and text, and reaches the xAgent side once.
func TestCrash_S1_PendingUserMessageSurvivesSIGKILL(t *testing.T) {
	store, addr := t.TempDir(), freeAddr(t)
	p := start(t, "-addr", addr, "-store", store, "-ack-timeout", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := &gate{calls: map[string]int{}, open: make(chan struct{}), seen: make(chan imv2.ChatMessage, 8)}
	client, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: p.url, Target: g,
		Advanced: dataplane.ClientAdvanced{CardID: consolebridge.CardID, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 500 * time.Millisecond},
	})
	require.NoError(t, err)
	defer client.Close()
	_, err = client.OpenChannel(ctx, "")
	require.NoError(t, err)

	_, err = io.WriteString(p.stdin, "typed just before the crash\n")
	require.NoError(t, err)
	first := recv(t, g.seen) // xAgent has it, but has not acked
	p.kill(t)

	p2 := start(t, "-addr", addr, "-store", store, "-ack-timeout", "1s")
	close(g.open) // xAgent may ack now
	sent := p2.until(t, func(e consolebridge.Event) bool { return e.Event == "sent" })
	last := sent[len(sent)-1]
	require.Equal(t, first.MessageID, last.MessageID, "S1: resent with the same message_id")
	require.Equal(t, "typed just before the crash", *last.Text, "S1: and the same text")
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, 1, g.calls[first.MessageID], "M9, A6: it reached xAgent once")
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	return testwait.Recv(t, ch, 20*time.Second) // a child process restarts in between
}
