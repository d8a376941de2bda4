package dataplane

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
)

// actTarget records the status the Connector shows.
type actTarget struct {
	*recTarget
	mu   sync.Mutex
	last imv2.ActivityStatus
	seen chan imv2.ActivityStatus
}

func (a *actTarget) SetActivity(_ context.Context, _ string, act imv2.ChatActivity) error {
	a.mu.Lock()
	a.last = act.Status
	a.mu.Unlock()
	a.seen <- act.Status
	return nil
}

func (a *actTarget) status() imv2.ActivityStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// loseFinal drops the first write of the final msg, as a connection that
// lost the frame would; the Channel resends it after its ack timeout.
type loseFinal struct {
	Conn
	msg  string
	lost *atomic.Bool
}

func (l *loseFinal) Write(ctx context.Context, p *imv2.Packet) error {
	if p.Type == imv2.TypeChatMessage && l.lost.CompareAndSwap(false, true) {
		if m, err := imv2.DecodeChatMessage(p, imv2.ToConnector); err == nil && m.MessageID == l.msg {
			return nil
		}
		l.lost.Store(false)
	}
	return l.Conn.Write(ctx, p)
}

// TestClient_C6_PreviousFinalDoesNotClearTheNextAnswersThinking: answer
// A's final is lost and resent after the next answer B said "thinking";
// the resent final clears the Connector's status (C6), and then the
// Client shows B's "thinking" again, because the snapshot is B's (its
// message_id), not A's. Before, B's thinking stayed cleared.
func TestClient_C6_PreviousFinalDoesNotClearTheNextAnswersThinking(t *testing.T) {
	target := &actTarget{recTarget: newRecTarget(), seen: make(chan imv2.ActivityStatus, 16)}
	_, url := startServer(t, func(c *ServerConfig) { c.NewTarget = func(string) imv2.Target { return target } })
	var lost atomic.Bool
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Options = &imv2.Options{Clock: clock.System{}, AckTimeout: 300 * time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond}
		cfg.Advanced.WrapConn = func(conn Conn) Conn { return &loseFinal{Conn: conn, msg: "A", lost: &lost} }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)

	a, err := c.NewReply(ch, "A")
	require.NoError(t, err)
	dA, err := a.Final(ctxWait(t), imv2.ChatMessage{Text: "first answer"})
	require.NoError(t, err)
	require.True(t, lost.Load(), "A's first write was lost")

	b, err := c.NewReply(ch, "B")
	require.NoError(t, err)
	require.NoError(t, b.Activity(ctxWait(t), imv2.ChatActivity{Status: imv2.ActivityThinking}))
	require.Equal(t, imv2.ActivityThinking, recv(t, target.seen))

	require.Equal(t, "A", target.next(t).MessageID, "A resent and shown")
	_, err = dA.Wait(ctxWait(t))
	require.NoError(t, err)
	require.Equal(t, imv2.ActivityIdle, recv(t, target.seen), "A's final cleared the status (C6)")
	require.Equal(t, imv2.ActivityThinking, recv(t, target.seen), "B's thinking shown again")

	require.NoError(t, b.Delta(ctxWait(t), "B says"))
	_, err = b.Final(ctxWait(t), imv2.ChatMessage{Text: "B says hi"})
	require.NoError(t, err)
	require.Equal(t, "B", target.next(t).MessageID)
	require.Eventually(t, func() bool { return target.status() == imv2.ActivityIdle }, wait, time.Millisecond)
	select {
	case s := <-target.seen:
		if s != imv2.ActivityIdle {
			t.Fatalf("after B's final the Connector was told %s", s)
		}
	default:
	}
}
