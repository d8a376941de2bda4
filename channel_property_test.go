package imv2

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2/fakeclock"
	"pgregory.net/rapid"
)

// lossyNet carries frames between an xAgent channel and a Connector channel
// and lets the property test drop, duplicate, reorder, delay and cut them.
type lossyNet struct {
	mu     sync.Mutex
	frames []frame
}

type frame struct {
	to  *Channel
	raw []byte
}

type lossyEnd struct {
	n  *lossyNet
	to func() *Channel
}

func (e lossyEnd) Send(_ context.Context, p *Packet) error {
	b, err := p.Encode()
	if err != nil {
		return err
	}
	e.n.mu.Lock()
	defer e.n.mu.Unlock()
	e.n.frames = append(e.n.frames, frame{to: e.to(), raw: b})
	return nil
}

func (n *lossyNet) len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.frames)
}

// take removes frame i (reordering when i > 0).
func (n *lossyNet) take(i int) (frame, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i >= len(n.frames) {
		return frame{}, false
	}
	f := n.frames[i]
	n.frames = append(n.frames[:i], n.frames[i+1:]...)
	return f, true
}

func (n *lossyNet) dup(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i < len(n.frames) {
		n.frames = append(n.frames, n.frames[i])
	}
}

func (n *lossyNet) clear() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.frames = nil
}

func deliverFrame(t *rapid.T, f frame) {
	p, err := DecodePacket(f.raw)
	if err != nil {
		t.Fatalf("undecodable frame on the wire: %v", err)
	}
	_ = f.to.Receive(context.Background(), p)
}

// settle waits until neither channel runs a goroutine or timer callback.
func settle(t *rapid.T, cs ...*Channel) {
	deadline := time.Now().Add(wait)
	for {
		busy := false
		for _, c := range cs {
			if c.active.Load() != 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("channels never settled")
		}
		runtime.Gosched()
	}
}

// TestProperty_S1_S2_A6_M9_ExactlyOnceOverLossyTransport runs an xAgent
// channel and a Connector channel over a network that drops, duplicates,
// reorders, delays and disconnects at random. After quiescence on a healthy
// network: every final reached the Connector's Target exactly once, every
// user message reached xAgent's handler exactly once, nothing is pending,
// and no store exceeds its cap.
func TestProperty_S1_S2_A6_M9_ExactlyOnceOverLossyTransport(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := fakeclock.New(t0)
		net := &lossyNet{}
		var x, c *Channel
		toX := lossyEnd{n: net, to: func() *Channel { return x }}
		toC := lossyEnd{n: net, to: func() *Channel { return c }}
		const completedCap = 64
		opts := func() *Options {
			return &Options{
				Clock: clk, AckTimeout: 2 * time.Second, RetryMin: time.Second, RetryMax: 4 * time.Second,
				Completed:  NewMemoryCompletedStore(completedCap, time.Hour, clk),
				Pending:    NewMemoryPendingStore(32),
				MaxUnacked: rapid.IntRange(1, 8).Draw(t, "window"),
			}
		}
		display := newStreamTarget()
		inbox := newRecTarget()
		var err error
		x, err = NewChannel("cch_1", RoleXAgent, imNegotiated(), toC, inbox, opts())
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		c, err = NewChannel("cch_1", RoleConnector, imNegotiated(), toX, display, opts())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()

		var finals, users []string
		connected := true
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 8).Draw(t, "action") {
			case 0: // a user types a message
				id, err := c.Send(context.Background(), ChatMessage{Text: fmt.Sprintf("user %d", len(users))})
				if err == nil {
					users = append(users, id)
				}
			case 1: // the agent streams a reply
				r := x.NewReply("")
				for i := range rapid.IntRange(0, 3).Draw(t, "deltas") {
					_ = r.Delta(context.Background(), fmt.Sprintf("d%d ", i))
				}
				if r.Final(context.Background(), ChatMessage{Text: "final " + r.MessageID()}) == nil {
					finals = append(finals, r.MessageID())
				}
			case 2, 3: // deliver one frame, maybe out of order
				if n := net.len(); n > 0 {
					if f, ok := net.take(rapid.IntRange(0, n-1).Draw(t, "pick")); ok {
						deliverFrame(t, f)
					}
				}
			case 4: // drop one
				if n := net.len(); n > 0 {
					net.take(rapid.IntRange(0, n-1).Draw(t, "drop"))
				}
			case 5: // duplicate one
				if n := net.len(); n > 0 {
					net.dup(rapid.IntRange(0, n-1).Draw(t, "dup"))
				}
			case 6: // time passes: ack timeouts and backoff fire
				clk.Advance(time.Duration(rapid.IntRange(0, 6000).Draw(t, "ms")) * time.Millisecond)
			case 7: // the connection breaks and everything in flight is lost
				if connected {
					x.SetTransport(nil)
					c.SetTransport(nil)
					settle(t, x, c)
					net.clear()
					connected = false
				}
			case 8: // it comes back
				if !connected {
					x.SetTransport(toC)
					c.SetTransport(toX)
					connected = true
				}
			}
			settle(t, x, c)
		}

		// Quiescence on a healthy network.
		if !connected {
			x.SetTransport(toC)
			c.SetTransport(toX)
		}
		for round := 0; ; round++ {
			if round > 500 {
				t.Fatalf("no quiescence")
			}
			settle(t, x, c)
			if f, ok := net.take(0); ok {
				deliverFrame(t, f)
				continue
			}
			px, _ := x.Pending(context.Background())
			pc, _ := c.Pending(context.Background())
			if len(px) == 0 && len(pc) == 0 {
				break
			}
			clk.Advance(5 * time.Second)
		}

		for _, id := range finals {
			if n := display.postCount(id); n != 1 {
				t.Fatalf("final %s posted %d times", id, n)
			}
		}
		for _, id := range users {
			if n := inbox.postCount(id); n != 1 {
				t.Fatalf("user message %s delivered %d times", id, n)
			}
		}
		if n := len(display.posts); n != len(finals) {
			t.Fatalf("%d posts for %d finals", n, len(finals))
		}
		for _, ch := range []*Channel{x, c} {
			if n := ch.o.Completed.(*memoryCompletedStore).Len(); n > completedCap {
				t.Fatalf("completed store holds %d > cap %d", n, completedCap)
			}
			ch.mu.Lock()
			open := len(ch.deltas)
			ch.mu.Unlock()
			if open > defaultMaxOpenDeltas {
				t.Fatalf("%d open delta streams", open)
			}
		}
	})
}
