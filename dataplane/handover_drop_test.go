package dataplane

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

// heldTarget holds its first post until released, whatever its context
// says: the post happens, only late.
type heldTarget struct {
	*recTarget
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *heldTarget) PostMessage(ctx context.Context, ch string, m *imv2.ChatMessage) error {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return h.recTarget.PostMessage(ctx, ch, m)
}

// handoverWatch is a completed store that notes, at each Handover, whether
// the message of interest was already recorded on the channel handed
// over, and then calls after.
type handoverWatch struct {
	imv2.ClaimStore
	mu       sync.Mutex
	from, id string
	sawIt    []bool
	after    func()
}

func (h *handoverWatch) Handover(ctx context.Context, from, to string) error {
	_, recorded, err := h.Lookup(ctx, from, h.id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if from == h.from {
		h.sawIt = append(h.sawIt, recorded)
	}
	h.mu.Unlock()
	err = h.ClaimStore.Handover(ctx, from, to)
	h.after()
	return err
}

// onLog calls f for every log record with the given message.
type onLog struct {
	msg string
	f   func()
}

func (o onLog) Enabled(context.Context, slog.Level) bool { return true }
func (o onLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == o.msg {
		o.f()
	}
	return nil
}
func (o onLog) WithAttrs([]slog.Attr) slog.Handler { return o }
func (o onLog) WithGroup(string) slog.Handler      { return o }

// TestServer_S8_HandoverWaitsForTheDroppedChannelsDelivery: a channel is
// evicted while its Target call runs, and its old ID reopened at once: the
// handover to the new ID must come after that call's completion record,
// so the resend on the new ID is answered duplicate and posted once.
func TestServer_S8_HandoverWaitsForTheDroppedChannelsDelivery(t *testing.T) {
	target := &heldTarget{recTarget: newRecTarget(), entered: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(target.release) }) }
	store := &handoverWatch{ClaimStore: imv2.NewMemoryCompletedStore(0, 0, nil), id: "a1", after: release}
	_, url := startServer(t, func(c *ServerConfig) {
		c.MaxChannels = 1
		c.NewTarget = func(string) imv2.Target { return target }
		c.Options = &imv2.Options{Completed: store}
		// The fix logs before it waits: the held post may end then. The
		// broken server never logs it, and the post ends after its
		// Handover instead (store.after), so neither run deadlocks.
		c.Logger = slog.New(onLog{msg: "dataplane: waiting for the dropped channel's delivery to end before the handover", f: release})
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	oldID, _ := p.open("")
	store.mu.Lock()
	store.from = oldID
	store.mu.Unlock()
	p.write(finalMessage(oldID, "a1", "hello"))
	recv(t, target.entered)
	require.Equal(t, protocol.TypeChannelCloseAck, p.call(protocol.TypeChannelClose, oldID, nil).Type)
	other, _ := p.open("") // MaxChannels 1: evicts the closed oldID, its post still held
	require.Equal(t, protocol.TypeChannelCloseAck, p.call(protocol.TypeChannelClose, other, nil).Type)

	newID, _ := p.open(oldID) // dropped and forgotten: a new ID, and a handover
	require.NotEqual(t, oldID, newID)
	store.mu.Lock()
	require.Equal(t, []bool{true}, store.sawIt, "S8: the handover ran before the dropped channel's post was recorded")
	store.mu.Unlock()

	resend := finalMessage(newID, "a1", "hello")
	p.write(resend)
	var ack *imv2.Packet
	for ack == nil {
		if pkt := p.next(); pkt.Type == imv2.TypeChatMessageAck && pkt.ConnectorChannelID == newID {
			ack = pkt
		}
	}
	a, err := imv2.DecodeChatMessageAck(ack)
	require.NoError(t, err)
	require.Equal(t, imv2.AckDuplicate, a.Status, "S8: the resend was answered %s %s", a.Status, a.Code)
	require.Equal(t, 1, target.count("a1"), "S8: shown once")
}

// TestServer_S8_HandoverWaitFollowsTheClock: the handover's wait for a
// dropped channel's Target call is bounded on the Channels' clock, as that
// call's TargetTimeout is: it ends when the fake clock passes
// TargetTimeout plus the store's slack, not after 70 s of wall time.
func TestServer_S8_HandoverWaitFollowsTheClock(t *testing.T) {
	clk := fakeclock.New(t0)
	target := &heldTarget{recTarget: newRecTarget(), entered: make(chan struct{}), release: make(chan struct{})}
	waiting := make(chan struct{})
	var once sync.Once
	srv, url := startServer(t, func(c *ServerConfig) {
		c.Clock = clk
		c.Conn.PingInterval = 24 * time.Hour // no keepalive while the test advances the clock
		c.MaxChannels = 1
		c.NewTarget = func(string) imv2.Target { return target }
		c.Options = &imv2.Options{TargetTimeout: time.Minute}
		c.Logger = slog.New(onLog{msg: "dataplane: waiting for the dropped channel's delivery to end before the handover", f: func() { once.Do(func() { close(waiting) }) }})
	})
	t.Cleanup(func() { close(target.release) }) // before the Server's Close
	p := dialPeer(t, url, nil)
	p.hello("")
	oldID, _ := p.open("")
	p.write(finalMessage(oldID, "a1", "hello"))
	recv(t, target.entered)
	require.Equal(t, protocol.TypeChannelCloseAck, p.call(protocol.TypeChannelClose, oldID, nil).Type)
	other, _ := p.open("") // evicts oldID, its post held past its timeout
	require.Equal(t, protocol.TypeChannelCloseAck, p.call(protocol.TypeChannelClose, other, nil).Type)

	opened := make(chan string, 1)
	go func() {
		id, _ := p.open(oldID)
		opened <- id
	}()
	recv(t, waiting) // the wait's timer is armed before this log line
	clk.Advance(srv.dropWait() - time.Nanosecond)
	select {
	case id := <-opened:
		t.Fatalf("the handover stopped waiting before the clock reached its bound: opened %q", id)
	default:
	}
	clk.Advance(time.Nanosecond)
	require.NotEqual(t, oldID, recv(t, opened))
}
