package imv2

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/fakeclock"
	"pgregory.net/rapid"
)

// TestBudget_Hierarchy: a reservation must fit the budget and every
// ancestor; a refused one takes nothing anywhere; Release gives back to
// every level.
func TestBudget_Hierarchy(t *testing.T) {
	root := NewBudget(100, nil)
	a, b := NewBudget(60, root), NewBudget(60, root)
	free := NewBudget(0, a) // no limit of its own: a and root bound it
	require.True(t, a.reserve(50))
	require.False(t, a.reserve(11), "a's own limit")
	require.True(t, b.reserve(50))
	require.False(t, b.reserve(1), "the root's limit binds before b's")
	require.Equal(t, int64(50), b.Used(), "a refused reservation takes nothing")
	require.Equal(t, int64(100), root.Used())
	require.False(t, free.reserve(1), "an unlimited child is bound by its ancestors")
	require.Zero(t, free.Used())
	b.release(50)
	require.True(t, free.reserve(10))
	require.Equal(t, []int64{10, 60, 60}, []int64{free.Used(), a.Used(), root.Used()})
	free.release(10)
	a.release(50)
	require.Zero(t, root.Used())
	var none *Budget
	require.True(t, none.reserve(1<<40), "a nil budget is unlimited")
	none.release(1)
	require.Zero(t, none.Used())
}

// TestBudget_ConcurrentNeverOver: concurrent reservations never pass the
// limit, and releasing all returns to zero.
func TestBudget_ConcurrentNeverOver(t *testing.T) {
	root := NewBudget(1000, nil)
	kids := []*Budget{NewBudget(600, root), NewBudget(600, root), NewBudget(0, root)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := kids[i%len(kids)]
			for range 2000 {
				if k.reserve(7) {
					mu.Lock()
					peak = max(peak, root.Used())
					mu.Unlock()
					k.release(7)
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, peak, int64(1000))
	require.Zero(t, root.Used())
}

// TestDelta_D9_BudgetBoundsStreamsAcrossChannels: two channels share one
// budget; once it is spent a new stream and a growing one get
// delta_limit_exceeded, and the budget never passes its limit. A final
// gives its stream's bytes back, and Close gives back everything.
func TestDelta_D9_BudgetBoundsStreamsAcrossChannels(t *testing.T) {
	const limit = 16 << 10
	b := NewBudget(limit, nil)
	c1, w1, _ := newConnector(t, newRecTarget(), &Options{Budget: b})
	c2, w2, _ := newConnectorID(t, "cch_2", newRecTarget(), &Options{Budget: b})
	ctx := context.Background()
	piece := strings.Repeat("x", 1000)
	rejected := 0
	next := []int64{1, 1} // each channel's next sequence; 0 once refused
	for range 20 {
		for i, c := range []*Channel{c1, c2} {
			if next[i] == 0 {
				continue
			}
			err := c.Receive(ctx, deltaPacketFor(t, c.ID(), "a1", next[i], piece))
			require.LessOrEqual(t, b.Used(), int64(limit))
			if err != nil {
				require.ErrorIs(t, err, &Error{Code: CodeDeltaLimitExceeded})
				require.Equal(t, CodeDeltaLimitExceeded, []*wire{w1, w2}[i].next(t).Error.Code)
				rejected++
				next[i] = 0
				continue
			}
			next[i]++
		}
	}
	require.NotZero(t, rejected, "40 KB of text cannot fit a 16 KiB budget")
	refusedNew := false // new streams fill what growth left, then are refused
	for i := range 20 {
		if err := c2.Receive(ctx, deltaPacketFor(t, "cch_2", "n"+string(rune('a'+i)), 1, piece)); err != nil {
			require.ErrorIs(t, err, &Error{Code: CodeDeltaLimitExceeded})
			require.Equal(t, CodeDeltaLimitExceeded, w2.next(t).Error.Code)
			refusedNew = true
			break
		}
		require.LessOrEqual(t, b.Used(), int64(limit))
	}
	require.True(t, refusedNew, "no room for a new stream")

	used := b.Used()
	p := finalPacket(t, "a1", "whole")
	require.NoError(t, c1.Receive(ctx, p))
	require.Equal(t, AckAccepted, ackOf(t, p, w1.next(t)).Status)
	require.Eventually(t, func() bool { return b.Used() < used-4096 }, wait, time.Millisecond, "the final released c1's stream")
	require.NoError(t, c2.Receive(ctx, deltaPacketFor(t, "cch_2", "z", 1, piece)), "room again")

	require.NoError(t, c1.Close())
	require.NoError(t, c2.Close())
	require.Zero(t, b.Used(), "Close gives back everything")
}

// TestLimit_BudgetBoundsQueuedFinals: finals queued behind a slow Target
// take budget; past it a final is rejected retryable channel_busy, and the
// budget comes back when the Target returns.
func TestLimit_BudgetBoundsQueuedFinals(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	text := strings.Repeat("y", 4000)
	b := NewBudget(3*queuedCost(finalPacket(t, "f0", text)), nil)
	c, w, _ := newConnector(t, target, &Options{Budget: b})
	ctx := context.Background()
	var queued []*Packet
	for i := range 3 {
		p := finalPacket(t, "f"+string(rune('0'+i)), text)
		require.NoError(t, c.Receive(ctx, p))
		queued = append(queued, p)
	}
	over := finalPacket(t, "f9", text)
	require.ErrorIs(t, c.Receive(ctx, over), &Error{Code: CodeChannelBusy})
	a := ackOf(t, over, w.next(t))
	require.Equal(t, CodeChannelBusy, a.Code)
	require.True(t, a.Retryable, "the sender tries again later")
	resend := finalPacket(t, "f0", text) // a resend waiting on f0 needs room too
	require.ErrorIs(t, c.Receive(ctx, resend), &Error{Code: CodeChannelBusy})
	require.Equal(t, CodeChannelBusy, ackOf(t, resend, w.next(t)).Code)
	close(target.gate)
	for _, p := range queued {
		require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	}
	require.Eventually(t, func() bool { return b.Used() == 0 }, wait, time.Millisecond)
	require.Zero(t, target.postCount("f9"))
}

// TestDelta_D9_OnlyGrowthRefreshesIdle: repeats of an earlier delta and
// empty deltas do not keep a stream alive; it is swept DeltaIdleTTL after
// its last growth, and its budget comes back.
func TestDelta_D9_OnlyGrowthRefreshesIdle(t *testing.T) {
	b := NewBudget(1<<20, nil)
	c, w, clk := newConnector(t, newRecTarget(), &Options{Budget: b, DeltaIdleTTL: time.Minute, DeltaSweep: 10 * time.Second})
	ctx := context.Background()
	require.NoError(t, c.Receive(ctx, deltaPacket(t, "a1", 1, "hello")))
	seq := int64(2)
	for range 5 { // 50 s of a repeat and an empty delta every 10 s
		clk.Advance(10 * time.Second)
		require.NoError(t, c.Receive(ctx, deltaPacket(t, "a1", 1, "hello")))
		require.NoError(t, c.Receive(ctx, deltaPacket(t, "a1", seq, "")))
		seq++
	}
	c.mu.Lock()
	require.Len(t, c.deltas, 1)
	c.mu.Unlock()
	clk.Advance(10 * time.Second) // a minute after its only growth
	c.mu.Lock()
	require.Empty(t, c.deltas, "repeats and empty deltas did not keep the stream alive")
	c.mu.Unlock()
	require.Zero(t, b.Used())
	w.none(t)
}

// newConnectorID is newConnector for a channel ID other than cch_1.
func newConnectorID(t *testing.T, id string, target Target, o *Options) (*Channel, *wire, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(t0)
	if o.Clock == nil {
		o.Clock = clk
	}
	w := newWire()
	c, err := NewChannel(id, RoleConnector, imNegotiated(), w, target, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, w, clk
}

func deltaPacketFor(t *testing.T, channel, id string, seq int64, text string) *Packet {
	t.Helper()
	p, err := NewChatMessageDelta(channel, ChatMessageDelta{MessageID: id, Sequence: seq, Text: text})
	require.NoError(t, err)
	return p
}

// TestBudget_Property_NoLeakNoOvershoot: any sequence of deltas (growing,
// repeated, empty, gapped, for new and open streams), finals and idle
// sweeps on two channels sharing a budget never takes it past its limit,
// and once every stream is finalised or swept the budget is back to zero;
// Close returns whatever is left.
func TestBudget_Property_NoLeakNoOvershoot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(2048, 64<<10).Draw(rt, "limit")
		b := NewBudget(limit, nil)
		clk := fakeclock.New(t0)
		noop := TargetFunc(func(context.Context, string, *ChatMessage) error { return nil })
		var chans []*Channel
		for _, id := range []string{"cch_1", "cch_2"} {
			c, err := NewChannel(id, RoleConnector, imNegotiated(), discardWire{}, noop,
				&Options{Budget: b, Clock: clk, TargetTimeout: time.Second, DeltaIdleTTL: time.Minute, DeltaSweep: 10 * time.Second, MaxDeltaBytes: 16 << 10})
			if err != nil {
				rt.Fatal(err)
			}
			chans = append(chans, c)
		}
		ctx := context.Background()
		next := map[string]int64{} // channel/message → next sequence the test expects accepted
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			c := chans[rapid.IntRange(0, 1).Draw(rt, "ch")]
			msg := fmt.Sprintf("m%d", rapid.IntRange(0, 3).Draw(rt, "msg"))
			key := c.ID() + "/" + msg
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2: // a delta: usually the next one, sometimes a repeat or a gap
				seq := max(next[key], 1) + int64(rapid.IntRange(-1, 1).Draw(rt, "skew"))
				text := strings.Repeat("t", rapid.IntRange(0, 3000).Draw(rt, "len"))
				p, err := NewChatMessageDelta(c.ID(), ChatMessageDelta{MessageID: msg, Sequence: max(seq, 1), Text: text})
				if err != nil {
					rt.Fatal(err)
				}
				if c.Receive(ctx, p) == nil && max(seq, 1) == max(next[key], 1) {
					next[key] = max(seq, 1) + 1
				}
			case 3: // the final
				p, err := NewChatMessage(c.ID(), ToConnector, ChatMessage{MessageID: msg + "f", Text: "done"})
				if err != nil {
					rt.Fatal(err)
				}
				_ = c.Receive(ctx, p)
				pf, err := NewChatMessage(c.ID(), ToConnector, ChatMessage{MessageID: msg, Text: "done"})
				if err != nil {
					rt.Fatal(err)
				}
				_ = c.Receive(ctx, pf)
				delete(next, key)
			case 4:
				clk.Advance(time.Duration(rapid.IntRange(1, 40).Draw(rt, "secs")) * time.Second)
			case 5:
				for _, c := range chans {
					waitIdle(rt, c, clk)
				}
			}
			if u := b.Used(); u > limit || u < 0 {
				rt.Fatalf("budget used %d, limit %d", u, limit)
			}
		}
		// Sweep every stream, finish every delivery: nothing is left held.
		for _, c := range chans {
			waitIdle(rt, c, clk)
		}
		clk.Advance(2 * time.Minute)
		for _, c := range chans {
			waitIdle(rt, c, clk)
		}
		if u := b.Used(); u != 0 {
			rt.Fatalf("%d bytes held after every stream was swept and every final delivered", u)
		}
		for _, c := range chans {
			_ = c.Close()
		}
		if u := b.Used(); u != 0 {
			rt.Fatalf("%d bytes held after Close", u)
		}
	})
}

// discardWire is a Transport that drops what it is given.
type discardWire struct{}

func (discardWire) Send(context.Context, *Packet) error { return nil }

// waitIdle waits until the channel's goroutines are done (deliveries
// answered, drafts shown). A final waiting for a stream that started
// before it (the order rule) waits TargetTimeout on clk: the clock is
// moved on by that much while the channel stays busy.
func waitIdle(rt *rapid.T, c *Channel, clk *fakeclock.Clock) {
	deadline := time.Now().Add(wait)
	nudge := time.Now().Add(20 * time.Millisecond)
	for c.active.Load() != 0 {
		if time.Now().After(deadline) {
			rt.Fatal("channel never went idle")
		}
		if time.Now().After(nudge) {
			clk.Advance(time.Second)
			nudge = time.Now().Add(20 * time.Millisecond)
		}
		runtime.Gosched()
	}
}
