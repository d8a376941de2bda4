package imv2

import (
	"container/heap"
	"time"

	"github.com/xagentkit/imv2/clock"
)

// deadlines is a Channel's one timer for the next steps of its pending
// messages (the ack timeout, the resend after a backoff, the end of the
// pending TTL): a min-heap of the messages by due time and a single Clock
// timer armed for the earliest, instead of a timer (and two closures) per
// transmission. Acks remove messages from the heap; the timer, armed for a
// message acked meanwhile, fires, finds nothing due and re-arms for the
// new earliest, so a busy channel arms about one timer per ack timeout.
// Guarded by the Channel's mu.
type deadlines struct {
	due   dueHeap
	timer clock.Timer
	at    time.Time // when timer fires (zero: no timer)
	gen   uint64    // counts the timers armed: a fire knows whether it is timer's
	seq   uint64    // ties are broken in scheduling order, as separate timers would fire
}

// dueStep is what a due message does next.
type dueStep uint8

const (
	stepTransmit   dueStep = iota + 1 // transmit (after a backoff; at the TTL it fails)
	stepAckTimeout                    // no ack within AckTimeout: retry
)

// scheduleLocked makes o take step at due, replacing what it had
// scheduled. c.mu must be held.
func (c *Channel) scheduleLocked(o *outgoing, due time.Time, step dueStep) {
	if c.dl == nil {
		c.dl = &deadlines{}
	}
	c.dl.seq++
	o.due, o.dueSeq, o.step = due, c.dl.seq, step
	if o.heapIdx > 0 {
		heap.Fix(&c.dl.due, o.heapIdx-1)
	} else {
		heap.Push(&c.dl.due, o)
	}
	c.armLocked()
}

// unscheduleLocked cancels o's next step. c.mu must be held.
func (c *Channel) unscheduleLocked(o *outgoing) {
	if c.dl == nil {
		return
	}
	if o.heapIdx > 0 {
		heap.Remove(&c.dl.due, o.heapIdx-1)
	}
	// An empty heap keeps its timer: it fires once, finds nothing due and
	// is not re-armed, where stopping it would cost a channel sending one
	// message at a time a timer stopped and another made per message.
}

// stopDeadlinesLocked stops the timer (Close).
func (c *Channel) stopDeadlinesLocked() {
	stopTimer(&c.dl.timer)
	c.dl.at = time.Time{}
}

// armLocked arms the timer for the earliest due time unless it fires by
// then already. c.mu must be held.
func (c *Channel) armLocked() {
	if len(c.dl.due) == 0 {
		return
	}
	first := c.dl.due[0].due
	if c.dl.timer != nil && !c.dl.at.After(first) {
		return
	}
	stopTimer(&c.dl.timer)
	c.dl.at = first
	c.dl.gen++
	gen := c.dl.gen
	c.dl.timer = c.afterLocked(first.Sub(c.o.Clock.Now()), func() { c.fireDeadlines(gen) })
}

// fireDeadlines runs the steps that are due, earliest first, and re-arms
// the timer for the rest.
func (c *Channel) fireDeadlines(gen uint64) {
	c.mu.Lock()
	if gen == c.dl.gen { // else a newer timer replaced this one as it fired
		c.dl.timer, c.dl.at = nil, time.Time{}
	}
	now := c.o.Clock.Now()
	var due []*outgoing
	var steps []dueStep
	for len(c.dl.due) > 0 && !c.dl.due[0].due.After(now) {
		o := heap.Pop(&c.dl.due).(*outgoing)
		due, steps = append(due, o), append(steps, o.step)
	}
	c.armLocked()
	c.mu.Unlock()
	for i, o := range due {
		switch steps[i] {
		case stepAckTimeout:
			c.retry(o, "ack timeout")
		case stepTransmit:
			c.transmit(o)
		}
	}
}

// dueHeap orders pending messages by due time (container/heap); an
// outgoing knows its index + 1 (0: not in the heap).
type dueHeap []*outgoing

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].dueSeq < h[j].dueSeq
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i+1, j+1
}
func (h *dueHeap) Push(x any) {
	o := x.(*outgoing)
	o.heapIdx = len(*h) + 1
	*h = append(*h, o)
}
func (h *dueHeap) Pop() any {
	old := *h
	o := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	o.heapIdx = 0
	return o
}
