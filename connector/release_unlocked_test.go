package connector

import (
	"context"
	"hash/maphash"
	"strconv"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// hangingReleaser's Released reports its context and then waits until the
// test lets it go: a platform call that hangs.
type hangingReleaser struct {
	editor
	in  chan context.Context
	out chan struct{}
}

func newHangingReleaser() *hangingReleaser {
	return &hangingReleaser{in: make(chan context.Context, 1), out: make(chan struct{})}
}

func (r *hangingReleaser) Released(ctx context.Context, _ string) error {
	r.in <- ctx
	<-r.out
	return nil
}

// sameStripe is a channel ID, other than id, on the kit's lock stripe of id.
func sameStripe(k *Connector, id string) string {
	stripe := func(s string) uint64 { return maphash.String(k.chLocks.seed, s) % channelLockStripes }
	for i := 0; ; i++ {
		if s := "ch_" + strconv.Itoa(i); s != id && stripe(s) == stripe(id) {
			return s
		}
	}
}

// deadlockGuard is how long a test waits for a call that must not block
// before calling it blocked: far longer than any call takes.
const deadlockGuard = 10 * time.Second

// TestKit_W6_SlowReleaseBlocksNoOtherChannel: Release runs after the
// channel's lock is let go, so a hung Release of one channel's key holds up
// no change of another channel sharing its lock stripe, and it gets a
// context bounded by the display's CallTimeout.
func TestKit_W6_SlowReleaseBlocksNoOtherChannel(t *testing.T) {
	p := newHangingReleaser()
	k, _ := newUnit(t, p, true, Options{})
	ctx := context.Background()
	a := "ch_a"
	b := sameStripe(k, a)
	for _, id := range []string{a, b} {
		if err := k.Bind(ctx, state.Binding{ChannelID: id, Key: "key-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	unbound := make(chan error, 1)
	go func() { unbound <- k.Unbind(ctx, a) }()
	rctx := <-p.in
	if dl, ok := rctx.Deadline(); !ok || time.Until(dl) > DefaultCallTimeout {
		t.Errorf("Release got deadline %v (set %v), want within %v", dl, ok, DefaultCallTimeout)
	}
	done := make(chan error, 1)
	go func() {
		done <- k.UpdateBinding(ctx, b, func(b *state.Binding) error { b.Data = []byte("cursor"); return nil })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("UpdateBinding of %s: %v", b, err)
		}
	case <-time.After(deadlockGuard):
		t.Errorf("UpdateBinding of %s (the stripe of %s) blocked while Release of %s's key runs", b, a, a)
		close(p.out)
		<-done
		<-unbound
		return
	}
	close(p.out)
	if err := <-unbound; err != nil {
		t.Fatal(err)
	}
}

// TestKit_W6_HangingDropReleaseStallsNoChannelOpen: a Release hanging in a
// channel's drop (offline grace over) does not stall the xAgent
// connection: a new channel whose OnChannelCreate binds on the dropped
// channel's lock stripe is answered.
func TestKit_W6_HangingDropReleaseStallsNoChannelOpen(t *testing.T) {
	p := newHangingReleaser()
	k, clock := newUnit(t, p, false, Options{DefaultConversation: func(ch string) string { return "conv-" + ch }})
	defer close(p.out)
	x := connectPipe(t, k)
	a, _ := x.open("")
	x.close()
	clock.Advance(dataplane.DefaultOfflineGrace)
	if _, ok := (<-p.in).Deadline(); !ok {
		t.Error("the drop's Release got a context without a deadline")
	}
	stripe := func(id string) uint64 { return maphash.String(k.chLocks.seed, id) % channelLockStripes }
	x2 := connectPipe(t, k)
	x2.open("") // hello and a first channel
	for i := 0; i < 2000; i++ {
		req, _ := imv2.NewPacket(protocol.TypeChannelOpen, "", nil)
		req.RequestID = "req_" + req.PacketID
		ctx, cancel := context.WithTimeout(context.Background(), deadlockGuard)
		_ = x2.c.Write(ctx, req)
		var ans *imv2.Packet
		var err error
		for {
			if ans, err = x2.c.Read(ctx); err != nil || ans.ReplyTo == req.PacketID {
				break
			}
		}
		cancel()
		if err != nil {
			t.Fatalf("channel.open #%d got no answer (%v) while the drop's Release of %s hangs", i, err, a)
		}
		var ack protocol.ChannelOpenAck
		if ans.Type != protocol.TypeChannelOpenAck || ans.DecodePayload(&ack) != nil {
			t.Fatalf("channel.open #%d answered %s %+v", i, ans.Type, ans.Error)
		}
		if stripe(ack.ConnectorChannelID) == stripe(a) {
			return // answered on the stripe of the hanging drop
		}
	}
	t.Fatal("no channel on the dropped channel's stripe in 2000 opens")
}
