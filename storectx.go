package imv2

import (
	"context"
	"sync"
	"time"

	"github.com/xagentkit/imv2/clock"
)

// storeContext is context.WithTimeout(parent, d) for the store and Target
// calls a Channel makes per message, with its timer started only when
// Done is called: a store or Target that never selects on Done costs no
// timer, no goroutine and one allocation, where context.WithTimeout costs
// four. A call that selects on Done gets the same deadline and the
// parent's cancellation, as with context.WithTimeout. It can also carry a
// message's idempotency key, computed only if the call asks for it
// (IdempotencyKey). This package's in-memory stores get none at all
// (Channel.storeCtx). The deadline is on the Channel's clock
// (Options.Clock), so a fake clock decides when a Target call times out.
type storeContext struct {
	parent   context.Context
	clk      clock.Clock
	deadline time.Time
	detached bool // context.WithoutCancel(parent): its values only (store calls)

	// The message whose idempotency key Value answers (empty: none).
	channelID, messageID string

	mu         sync.Mutex
	key        string        // computed by the first IdempotencyKey
	done       chan struct{} // made by the first Done
	timer      clock.Timer
	stopParent func() bool // stops the parent watch armed by Done
	err        error
}

// newStoreContext is context.WithTimeout(context.WithoutCancel(parent), d)
// on clk, lazily: a store call must finish even while the channel closes.
func newStoreContext(clk clock.Clock, parent context.Context, d time.Duration) *storeContext {
	return &storeContext{parent: parent, clk: clk, deadline: clk.Now().Add(d), detached: true}
}

// call returns c as the ctx of a store call, or context.Background() for
// the nil c of an in-memory store (Channel.storeCtx).
func (c *storeContext) call() context.Context {
	if c == nil {
		return context.Background()
	}
	return c
}

// newTargetContext is context.WithTimeout(WithIdempotencyKey(parent,
// IdempotencyKeyOf(channelID, messageID)), d) on clk, lazily; with an
// empty messageID it carries no key.
func newTargetContext(clk clock.Clock, parent context.Context, d time.Duration, channelID, messageID string) *storeContext {
	c := new(storeContext)
	c.initTarget(clk, parent, d, channelID, messageID)
	return c
}

// initTarget makes the zero c what newTargetContext returns, in place (a
// delivery holds its Target context: one allocation for both).
func (c *storeContext) initTarget(clk clock.Clock, parent context.Context, d time.Duration, channelID, messageID string) {
	c.parent, c.clk, c.deadline, c.channelID, c.messageID = parent, clk, clk.Now().Add(d), channelID, messageID
}

// Deadline implements context.Context.
func (c *storeContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && !c.detached && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Value implements context.Context.
func (c *storeContext) Value(key any) any {
	if _, ok := key.(idempotencyKeyCtx); ok && c.messageID != "" {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.key == "" {
			c.key = IdempotencyKeyOf(c.channelID, c.messageID)
		}
		return c.key
	}
	return c.parent.Value(key)
}

// Done implements context.Context; the first call arms the deadline timer
// and the watch on the parent.
func (c *storeContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	c.expireLocked()
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.timer = c.clk.AfterFunc(c.deadline.Sub(c.clk.Now()), func() { c.end(context.DeadlineExceeded) })
	if !c.detached && c.parent.Done() != nil {
		c.stopParent = context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
	}
	return c.done
}

// Err implements context.Context.
func (c *storeContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.expireLocked() {
		c.endLocked(c.err)
	}
	return c.err
}

// expireLocked sets err once the deadline has passed or the parent ended;
// it reports whether it did so now.
func (c *storeContext) expireLocked() bool {
	if c.err != nil {
		return false
	}
	if err := c.parent.Err(); err != nil && !c.detached {
		c.err = err
		return true
	}
	if !c.clk.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
		return true
	}
	return false
}

// release ends the context (context.Canceled), as the CancelFunc of
// context.WithTimeout does; call it when the call returned. A nil c (an
// in-memory store's call) has nothing to end.
func (c *storeContext) release() {
	if c != nil {
		c.end(context.Canceled)
	}
}

func (c *storeContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	c.endLocked(err)
}

// endLocked closes Done and stops the timer and the parent watch; err is
// set.
func (c *storeContext) endLocked(error) {
	if c.done != nil {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopParent != nil {
		c.stopParent()
	}
}
