package imv2

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// appearTarget records each message ID when it first appears: its first
// draft (when drafts is set) or its post.
type appearTarget struct {
	drafts bool
	mu     sync.Mutex
	seen   map[string]bool
	order  []string
	posts  int
	all    chan struct{}
	n      int
}

func (a *appearTarget) show(id string, post bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.seen[id] {
		a.seen[id] = true
		a.order = append(a.order, id)
	}
	if post {
		a.posts++
		if a.posts == a.n {
			close(a.all)
		}
	}
}

func (a *appearTarget) PostMessage(_ context.Context, _ string, m *ChatMessage) error {
	a.show(m.MessageID, true)
	return nil
}

// drafting is an appearTarget that shows drafts.
type drafting struct{ *appearTarget }

func (d drafting) UpdateDraft(_ context.Context, _, id, _ string) error {
	d.show(id, false)
	return nil
}

// TestChannel_Property_M14_RepliesShowInTheOrderTheyStarted: any
// interleaving of up to six replies' deltas and finals (each reply's own
// packets in order; some replies with no deltas) is shown in the order
// the replies started — first delta, or final when none — with a Target
// that shows drafts and with one that does not (finals only).
func TestChannel_Property_M14_RepliesShowInTheOrderTheyStarted(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(rt, "replies")
		withDrafts := rapid.Bool().Draw(rt, "drafts")
		// Each reply: its deltas, then its final.
		left := make([]int, n) // deltas still to send
		for i := range left {
			left[i] = rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("deltas%d", i))
		}
		next := make([]int64, n) // the next delta's sequence
		done := make([]bool, n)
		at := &appearTarget{drafts: withDrafts, seen: map[string]bool{}, all: make(chan struct{}), n: n}
		var target Target = at
		if withDrafts {
			target = drafting{at}
		}
		c, _, _ := newConnector(t, target, nil)
		var started []string
		for remaining := n; remaining > 0; {
			var open []int
			for i := range n {
				if !done[i] {
					open = append(open, i)
				}
			}
			i := rapid.SampledFrom(open).Draw(rt, "next")
			id := fmt.Sprintf("r%d", i)
			if !slices.Contains(started, id) {
				started = append(started, id)
			}
			var p *Packet
			if left[i] > 0 {
				left[i]--
				next[i]++
				p = deltaPacket(t, id, next[i], "t")
			} else {
				done[i] = true
				remaining--
				p = finalPacket(t, id, "final")
			}
			if err := c.Receive(context.Background(), p); err != nil {
				rt.Fatalf("receive %s: %v", id, err)
			}
		}
		recv(t, at.all)
		at.mu.Lock()
		defer at.mu.Unlock()
		if !slices.Equal(at.order, started) {
			rt.Fatalf("shown %v, started %v", at.order, started)
		}
	})
}

// TestChannel_Property_S2_SendOrderAnyWindow: any number of messages sent
// one after another through any send window reach the peer's Target in
// the order Send took them.
func TestChannel_Property_S2_SendOrderAnyWindow(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(rt, "messages")
		window := rapid.IntRange(1, 8).Draw(rt, "window")
		got := sendInOrderWindow(t, n, window, nil)
		for i, id := range got {
			if id != fmt.Sprintf("u%03d", i+1) {
				rt.Fatalf("received %v", got)
			}
		}
	})
}
