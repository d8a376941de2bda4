package imv2

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// The order rule (package doc, "Order") on the receiving side: a
// channel's messages reach the Target in the order they started — a
// message's first delta, or its final when it streamed none — whatever
// order their finals come in, with overlapping streams, retries and
// resends. Each message takes a place when it starts; a place is settled
// once the message is in the chat (its first draft shown) or has ended
// (delivered, rejected, dropped). A first draft and a final go to the
// Target only when every earlier place is settled, waiting at most
// TargetTimeout (then a first draft is skipped, the message shown by its
// final alone, and a final goes ahead). A message rejected retryable
// holds the channel's later ones (held): they are rejected channel_busy,
// retryable, in the order they came, until it is delivered or rejected
// for good, or was not sent again for OrderTTL.

// orderState is a channel's order, made on first use (an idle channel
// holds none).
type orderState struct {
	// Sender: the admitted messages to transmit, in send order
	// (queueLocked); whether a goroutine is transmitting them (drain);
	// the last send order given (trackLocked).
	txq      []*outgoing
	draining bool
	sending  *outgoing // the message the draining goroutine is transmitting
	sent     sync.Cond // on Channel.mu: broadcast after each transmission
	seq      uint64
	// Receiver: the places not settled, in the order the messages
	// started; the last place given; the channel closed on the next
	// change (made on demand); the unresolved message with those held
	// behind it.
	places   []*place
	placeSeq uint64
	placeCh  chan struct{}
	holds    []heldMessage
}

// orderLocked returns the channel's order state, made on first use.
// c.mu is held.
func (c *Channel) orderLocked() *orderState {
	if c.ord == nil {
		c.ord = &orderState{}
		c.ord.sent.L = &c.mu
	}
	return c.ord
}

// place is one message's position on its channel.
type place struct {
	seq uint64
	id  string
}

// heldMessage is one message of the channel's hold: the first is the
// unresolved one (rejected retryable, not delivered yet), the others the
// ones rejected busy behind it, oldest first.
type heldMessage struct {
	id   string
	seen time.Time // its last attempt or busy answer
}

// newPlaceLocked gives message id the channel's next place. c.mu is held.
func (c *Channel) newPlaceLocked(id string) *place {
	o := c.orderLocked()
	o.placeSeq++
	p := &place{seq: o.placeSeq, id: id}
	o.places = append(o.places, p) // seq grows: places stays sorted
	return p
}

// settlePlaceLocked settles p: the message is in the chat or ended; the
// places after it may go. c.mu is held.
func (c *Channel) settlePlaceLocked(p *place) {
	if p == nil || c.ord == nil {
		return
	}
	i := slices.Index(c.ord.places, p)
	if i < 0 {
		return
	}
	c.ord.places = slices.Delete(c.ord.places, i, i+1)
	c.signalLocked()
}

// firstLocked reports whether p may go: it is settled (its message is
// in the chat already) or every place before it is. c.mu is held.
func (c *Channel) firstLocked(p *place) bool {
	if p == nil || c.ord == nil {
		return true
	}
	ps := c.ord.places
	return len(ps) == 0 || ps[0].seq >= p.seq || !slices.Contains(ps, p)
}

// signalLocked wakes the goroutines waiting for a change of the places
// or of the delivery queue. c.mu is held.
func (c *Channel) signalLocked() {
	if c.ord != nil && c.ord.placeCh != nil {
		close(c.ord.placeCh)
		c.ord.placeCh = nil
	}
}

// waitSignal waits, with c.mu held on entry and on return, for the next
// signalLocked, for the channel to close or until deadline on the
// Channel's clock. It reports false when deadline passed.
func (c *Channel) waitSignal(deadline time.Time) bool {
	d := deadline.Sub(c.o.Clock.Now())
	if d <= 0 {
		return false
	}
	o := c.orderLocked()
	if o.placeCh == nil {
		o.placeCh = make(chan struct{})
	}
	ch := o.placeCh
	c.mu.Unlock()
	defer c.mu.Lock()
	timeout := make(chan struct{})
	t := c.o.Clock.AfterFunc(d, func() { close(timeout) })
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-timeout:
		return false
	case <-c.ctx.Done():
		return true
	}
}

// heldLocked drops the hold's entries not seen for OrderTTL and reports
// whether the channel holds an unresolved message. c.mu is held.
func (c *Channel) heldLocked() bool {
	if c.ord == nil || len(c.ord.holds) == 0 {
		return false
	}
	now := c.o.Clock.Now()
	c.ord.holds = slices.DeleteFunc(c.ord.holds, func(h heldMessage) bool { return now.Sub(h.seen) >= c.o.OrderTTL })
	if len(c.ord.holds) == 0 {
		c.ord.holds = nil
		c.signalLocked()
		return false
	}
	return true
}

// admitHeldLocked is nil when message id may go to the Target: nothing
// is held, or id is the unresolved message. Otherwise id is queued behind
// it and the answer is channel_busy, retryable. c.mu is held.
func (c *Channel) admitHeldLocked(id string) *Error {
	if !c.heldLocked() {
		return nil
	}
	o := c.ord
	now := c.o.Clock.Now()
	i := slices.IndexFunc(o.holds, func(h heldMessage) bool { return h.id == id })
	switch {
	case i >= 0:
		o.holds[i].seen = now
	case len(o.holds) < c.o.MaxInflight: // remote input: later ones are rejected busy, not promised a place
		o.holds = append(o.holds, heldMessage{id: id, seen: now})
	}
	if i == 0 {
		return nil
	}
	return &Error{Code: CodeChannelBusy, Retryable: true,
		Message: fmt.Sprintf("message %q waits for the earlier message %q, not delivered yet", id, o.holds[0].id)}
}

// settleHeldLocked records how message id, admitted, ended: delivered
// or rejected for good ends its hold, and the next held message is the
// unresolved one; rejected retryable makes id the unresolved message.
// c.mu is held.
func (c *Channel) settleHeldLocked(id string, status AckStatus, rej *Error) {
	settled := status != AckRejected || rej == nil || !rej.Retryable
	if settled && (c.ord == nil || len(c.ord.holds) == 0) {
		return // the usual case: no allocation
	}
	o := c.orderLocked()
	i := slices.IndexFunc(o.holds, func(h heldMessage) bool { return h.id == id })
	if settled {
		if i >= 0 {
			o.holds = slices.Delete(o.holds, i, i+1)
			c.signalLocked()
		}
		return
	}
	if i >= 0 {
		o.holds = slices.Delete(o.holds, i, i+1)
	}
	o.holds = slices.Insert(o.holds, 0, heldMessage{id: id, seen: c.o.Clock.Now()})
}
