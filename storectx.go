package imv2

import (
	"context"
	"sync"
	"time"
)

// storeContext is context.WithTimeout(context.WithoutCancel(parent), d)
// for store calls, with its timer started only when Done is called. The
// in-memory stores never ask, so a message's three store calls cost no
// timer and one small allocation each; a store that selects on Done gets
// the same deadline as with context.WithTimeout.
type storeContext struct {
	parent   context.Context // never cancelled
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	timer *time.Timer
	err   error
}

func newStoreContext(parent context.Context, d time.Duration) *storeContext {
	return &storeContext{parent: parent, deadline: time.Now().Add(d)}
}

// Deadline implements context.Context.
func (c *storeContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Value implements context.Context.
func (c *storeContext) Value(key any) any { return c.parent.Value(key) }

// Done implements context.Context; the first call arms the deadline timer.
func (c *storeContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	c.expireLocked()
	switch {
	case c.err != nil:
		close(c.done)
	default:
		c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
	}
	return c.done
}

// Err implements context.Context.
func (c *storeContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.expireLocked() && c.done != nil {
		close(c.done)
		c.timer.Stop()
	}
	return c.err
}

// expireLocked sets err once the deadline has passed; it reports whether
// it did so now.
func (c *storeContext) expireLocked() bool {
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
		return true
	}
	return false
}

// release ends the context (context.Canceled), as the CancelFunc of
// context.WithTimeout does; call it when the store call returned.
func (c *storeContext) release() { c.end(context.Canceled) }

func (c *storeContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}
