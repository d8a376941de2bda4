package imv2

import (
	"context"
	"sync"
	"time"
)

// storeContext is context.WithTimeout(parent, d) for the store and Target
// calls a Channel makes per message, with its timer started only when
// Done is called: the in-memory stores and a Target that never selects on
// Done cost no timer, no goroutine and one allocation each, where
// context.WithTimeout costs four. A call that selects on Done gets the
// same deadline and the parent's cancellation, as with
// context.WithTimeout. It can also carry a message's idempotency key,
// computed only if the call asks for it (IdempotencyKey).
type storeContext struct {
	parent   context.Context
	deadline time.Time
	detached bool // context.WithoutCancel(parent): its values only (store calls)
	// free takes the context back on release (nil: never reused).
	free *storeContextFree

	// The message whose idempotency key Value answers (empty: none).
	channelID, messageID string

	mu         sync.Mutex
	key        string        // computed by the first IdempotencyKey
	done       chan struct{} // made by the first Done
	timer      *time.Timer
	stopParent func() bool // stops the parent watch armed by Done
	err        error
}

// newStoreContext is context.WithTimeout(context.WithoutCancel(parent), d),
// lazily: a store call must finish even while the channel closes. It is
// taken from free, and returned there by release, when free is not nil.
func newStoreContext(parent context.Context, d time.Duration, free *storeContextFree) *storeContext {
	c := free.get()
	c.parent, c.deadline, c.detached, c.free = parent, time.Now().Add(d), true, free
	return c
}

// storeContextFree is the free list of store contexts of one of this
// package's in-memory stores (storeContextsOf): a received message makes
// two or three store calls, each would cost an allocation. Only these
// stores get one: they provably drop ctx when the call returns, where a
// user's store may keep it (Go's context contract allows it: a
// write-behind flush with context.WithoutCancel(ctx), a trace span), and
// a reused context would then answer with the next call's values or
// panic on a nil parent. The list belongs to its store, not to the
// package (no global state), and holds at most maxFreeStoreContexts.
type storeContextFree struct {
	mu   sync.Mutex
	free []*storeContext
}

// maxFreeStoreContexts bounds a store's free list: about the store calls
// in flight at once on a busy connection; more are allocated and dropped.
const maxFreeStoreContexts = 64

// get returns a zero store context, reused if f has one; a nil f has none.
func (f *storeContextFree) get() *storeContext {
	if f == nil {
		return new(storeContext)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.free); n > 0 {
		c := f.free[n-1]
		f.free[n-1] = nil
		f.free = f.free[:n-1]
		return c
	}
	return new(storeContext)
}

// put keeps the zeroed c for the next get, unless the list is full.
func (f *storeContextFree) put(c *storeContext) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.free) < maxFreeStoreContexts {
		f.free = append(f.free, c)
	}
}

// storeContextsOf returns the free list of store, if it is one of this
// package's in-memory stores, nil otherwise (a context per call, never
// reused). The check is on the concrete type: a user's store wrapping a
// memory store is the user's store.
func storeContextsOf(store any) *storeContextFree {
	switch s := store.(type) {
	case *memoryCompletedStore:
		return &s.ctxs
	case *memoryPendingStore:
		return &s.ctxs
	}
	return nil
}

// newTargetContext is context.WithTimeout(WithIdempotencyKey(parent,
// IdempotencyKeyOf(channelID, messageID)), d), lazily.
func newTargetContext(parent context.Context, d time.Duration, channelID, messageID string) *storeContext {
	c := new(storeContext)
	c.initTarget(parent, d, channelID, messageID)
	return c
}

// initTarget makes the zero c what newTargetContext returns, in place (a
// delivery holds its Target context: one allocation for both).
func (c *storeContext) initTarget(parent context.Context, d time.Duration, channelID, messageID string) {
	c.parent, c.deadline, c.channelID, c.messageID = parent, time.Now().Add(d), channelID, messageID
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
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
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
	if !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
		return true
	}
	return false
}

// release ends the context (context.Canceled), as the CancelFunc of
// context.WithTimeout does; call it when the call returned. The context
// goes back to its free list if it has one (an in-memory store's) and
// Done was never asked.
func (c *storeContext) release() {
	c.end(context.Canceled)
	c.mu.Lock()
	// A call that selected on Done may still hold the channel: that
	// context is left to the collector.
	free := c.free
	reuse := free != nil && c.done == nil
	c.mu.Unlock()
	if reuse {
		*c = storeContext{}
		free.put(c)
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
