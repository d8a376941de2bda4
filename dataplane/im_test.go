package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
)

// imPair is a Server and a Client over a real loopback WebSocket with one
// open channel, recording both Targets and every terminal ack.
type imPair struct {
	srv       *Server
	cli       *Client
	clk       *armClock
	events    chan connected
	connector *recTarget // the IM platform: finals and drafts
	agent     *recTarget // the agent: user messages
	srvAcked  chan string
	cliAcked  chan string
	id        string
	sch       *imv2.Channel
}

func ackObserver(ch chan string) imv2.Observer {
	return imv2.ObserverFunc(func(e imv2.Event) {
		if e.Kind == imv2.EventAcked {
			ch <- e.MessageID
		}
	})
}

func newIMPair(t *testing.T) *imPair {
	t.Helper()
	p := &imPair{connector: newRecTarget(), agent: newRecTarget(), srvAcked: make(chan string, 64), cliAcked: make(chan string, 64)}
	var url string
	p.srv, url = startServer(t, func(c *ServerConfig) {
		c.NewTarget = func(string) imv2.Target { return p.connector }
		c.Options = &imv2.Options{Observer: ackObserver(p.srvAcked)}
	})
	p.cli, p.clk, p.events = dialClient(t, url, func(c *ClientConfig) {
		c.Target = p.agent
		c.Options = &imv2.Options{Clock: clock.System{}, Observer: ackObserver(p.cliAcked)}
	})
	recv(t, p.events)
	var err error
	p.id, err = p.cli.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	p.sch = p.srv.Channel(p.id)
	require.NotNil(t, p.sch)
	return p
}

func TestIM_M1_D8_UserMessageAndStreamedReply(t *testing.T) {
	p := newIMPair(t)
	ctx := ctxWait(t)

	// A user message, Connector → xAgent, acked accepted.
	uid, err := p.sch.Send(ctx, imv2.ChatMessage{Text: "hi agent"})
	require.NoError(t, err)
	got := p.agent.next(t)
	require.Equal(t, uid, got.MessageID)
	require.Equal(t, "hi agent", got.Text)
	require.Equal(t, uid, recv(t, p.srvAcked))

	// A streamed reply: two deltas, then the final, xAgent → Connector.
	r, err := p.cli.NewReply(p.id, "")
	require.NoError(t, err)
	require.NoError(t, r.Delta(ctx, "Hel"))
	require.Equal(t, "Hel", recv(t, p.connector.shown), "D8: the first delta creates the draft")
	require.NoError(t, r.Delta(ctx, "lo"))
	require.Equal(t, "Hello", recv(t, p.connector.shown), "D8: later deltas update it")
	_, err = r.Final(ctx, imv2.ChatMessage{Text: "Hello!"})
	require.NoError(t, err)
	final := p.connector.next(t)
	require.Equal(t, r.MessageID(), final.MessageID)
	require.Equal(t, "Hello!", final.Text, "M11: the final's text is the whole body")
	require.Equal(t, r.MessageID(), recv(t, p.cliAcked))
	require.Equal(t, []string{"Hel", "Hello"}, p.connector.draftList())
	require.Equal(t, 1, p.connector.count(r.MessageID()))
	require.Equal(t, 1, p.agent.count(uid))
}

func TestIM_S10_ReconnectMidStreamAndPending(t *testing.T) {
	p := newIMPair(t)
	ctx := ctxWait(t)

	// Completed history on both sides before any reconnect.
	u0, err := p.sch.Send(ctx, imv2.ChatMessage{Text: "u0"})
	require.NoError(t, err)
	p.agent.next(t)
	require.Equal(t, u0, recv(t, p.srvAcked))
	r0, err := p.cli.NewReply(p.id, "")
	require.NoError(t, err)
	_, err = r0.Final(ctx, imv2.ChatMessage{Text: "f0"})
	require.NoError(t, err)
	p.connector.next(t)
	require.Equal(t, r0.MessageID(), recv(t, p.cliAcked))

	// A reply starts streaming …
	r, err := p.cli.NewReply(p.id, "")
	require.NoError(t, err)
	require.NoError(t, r.Delta(ctx, "Hel"))
	require.Equal(t, "Hel", recv(t, p.connector.shown))

	// … the connection breaks; the client sleeps before redialling.
	p.srv.dropConnections()
	recv(t, p.clk.armed)

	// While down: the rest of the stream fails to leave, the final and a
	// user message stay pending on their senders (A5).
	require.Error(t, r.Delta(ctx, "lo"), "deltas are not queued")
	_, err = r.Final(ctx, imv2.ChatMessage{Text: "Hello"})
	require.NoError(t, err)
	u1, err := p.sch.Send(ctx, imv2.ChatMessage{Text: "u1"})
	require.NoError(t, err)
	pending, err := p.cli.engine(p.id).Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	pending, err = p.sch.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)

	// Reconnect: hello with the last connector_id, reopen, resend pending.
	p.clk.Advance(p.cli.cfg.Advanced.ReconnectMax)
	ev := recv(t, p.events)
	require.Equal(t, []string{p.id}, ev.ids)
	final := p.connector.next(t)
	require.Equal(t, r.MessageID(), final.MessageID)
	require.Equal(t, "Hello", final.Text)
	user := p.agent.next(t)
	require.Equal(t, u1, user.MessageID)
	require.Equal(t, r.MessageID(), recv(t, p.cliAcked))
	require.Equal(t, u1, recv(t, p.srvAcked))

	// Nothing is pending now, so a further reconnect resends nothing (S10).
	for _, ch := range []*imv2.Channel{p.cli.engine(p.id), p.sch} {
		pending, err := ch.Pending(ctx)
		require.NoError(t, err)
		require.Empty(t, pending)
	}
	ev = reconnect(t, p.srv, p.clk, p.events)
	require.Equal(t, []string{p.id}, ev.ids)

	// The link works after it, and every message was delivered exactly once.
	u2, err := p.sch.Send(ctx, imv2.ChatMessage{Text: "u2"})
	require.NoError(t, err)
	require.Equal(t, u2, p.agent.next(t).MessageID)
	require.Equal(t, u2, recv(t, p.srvAcked))
	for _, id := range []string{u0, u1, u2} {
		require.Equal(t, 1, p.agent.count(id), "user message %s", id)
	}
	for _, id := range []string{r0.MessageID(), r.MessageID()} {
		require.Equal(t, 1, p.connector.count(id), "final %s", id)
	}
	require.Equal(t, []string{"Hel"}, p.connector.draftList(), "the lost delta was never shown")
}

// TestIM_S10_ResendOfDeliveredFinalIsDuplicate covers the window where a
// final reached the Connector but its ack was lost with the connection:
// the resend after the reconnect is answered duplicate and not posted
// again (A6, S10).
func TestIM_S10_ResendOfDeliveredFinalIsDuplicate(t *testing.T) {
	p := newIMPair(t)
	ctx := ctxWait(t)
	// Hand the final to the Connector's Channel directly, as if its ack had
	// been lost: the Connector completed it, the xAgent side still holds it.
	m := imv2.ChatMessage{MessageID: imv2.NewMessageID(), Text: "once"}
	require.NoError(t, p.srv.Channel(p.id).Receive(ctx, finalMessage(p.id, m.MessageID, m.Text)))
	p.connector.next(t)
	p.srv.dropConnections()
	recv(t, p.clk.armed)
	_, err := p.cli.Send(ctx, p.id, m) // pending on xAgent, already completed on the Connector
	require.NoError(t, err)
	p.clk.Advance(p.cli.cfg.Advanced.ReconnectMax)
	recv(t, p.events)
	require.Equal(t, m.MessageID, recv(t, p.cliAcked), "acked (duplicate) after the reconnect")
	require.Equal(t, 1, p.connector.count(m.MessageID))
}
