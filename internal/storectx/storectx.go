// Package storectx is context.WithTimeout for the store and Target calls
// a Channel makes per message, with its timer started only when Done is
// called: a store or Target that never selects on Done costs no timer, no
// goroutine and one allocation (none when the Context lives in a struct
// the caller allocates anyway), where context.WithTimeout costs four. A
// call that selects on Done gets the same deadline and the parent's
// cancellation, as with context.WithTimeout. It can also carry one value
// made only if the call asks for it (Key: a message's idempotency key, a
// SHA-256). The deadline is on the given clock, so a fake clock decides
// when a call times out.
//
// It is kept because it pays end to end (issue 24): with
// context.WithTimeout(WithIdempotencyKey(parent, key), d) instead, a
// message acknowledged over a loopback WebSocket costs 1.3× the wall time
// and 1.2× the CPU, with 23 allocations instead of 16 (RoundTripWS/sdk-64),
// and 1.2× both on one channel (ChannelsWS/ch-1). Medians of 13
// interleaved pairs on a shared 2-core machine (load 3 to 12) of
//
//	go test -c -o /tmp/dp.test ./dataplane
//	/tmp/dp.test -test.run '^$' -test.bench '^Benchmark(RoundTripWS|ChannelsWS)$' -test.benchtime 2s
//
// against a build whose Target call gets that context.WithTimeout.
package storectx

import (
	"context"
	"sync"
	"time"

	"github.com/xagentkit/imv2/clock"
)

// Key is a value a Context carries, made only when asked for: Value(Name)
// returns Of(A, B). The zero Key carries none.
type Key struct {
	Name any // the context key, comparable
	Of   func(a, b string) string
	A, B string
}

// Context is the context.Context this package makes; a nil *Context is
// the context of a call that needs none (Call, Release).
type Context struct {
	parent   context.Context
	clk      clock.Clock
	deadline time.Time
	detached bool // context.WithoutCancel(parent): its values only (store calls)

	key Key // the value Value makes (Key.Of nil: none)

	mu         sync.Mutex
	val        string        // key's value, made by the first Value that asks
	done       chan struct{} // made by the first Done
	timer      clock.Timer
	stopParent func() bool // stops the parent watch armed by Done
	err        error
	after      *afterFunc // AfterFunc's functions not yet stopped, called when c ends
}

// New is context.WithTimeout(context.WithoutCancel(parent), d) on clk,
// lazily: a store call must finish even while the caller closes.
func New(clk clock.Clock, parent context.Context, d time.Duration) *Context {
	return &Context{parent: parent, clk: clk, deadline: clk.Now().Add(d), detached: true}
}

// Call returns c as the ctx of a call, or context.Background() for a nil
// c.
func (c *Context) Call() context.Context {
	if c == nil {
		return context.Background()
	}
	return c
}

// NewTarget is context.WithTimeout(context.WithValue(parent, k.Name,
// k.Of(k.A, k.B)), d) on clk, lazily; with the zero k it carries no value.
func NewTarget(clk clock.Clock, parent context.Context, d time.Duration, k Key) *Context {
	c := new(Context)
	c.InitTarget(clk, parent, d, k)
	return c
}

// InitTarget makes the zero c what NewTarget returns, in place (a caller
// that holds its Context in a struct of its own saves the allocation).
func (c *Context) InitTarget(clk clock.Clock, parent context.Context, d time.Duration, k Key) {
	c.parent, c.clk, c.deadline, c.key = parent, clk, clk.Now().Add(d), k
}

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && !c.detached && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Value implements context.Context.
func (c *Context) Value(key any) any {
	if c.key.Of != nil && key == c.key.Name {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.val == "" {
			c.val = c.key.Of(c.key.A, c.key.B)
		}
		return c.val
	}
	return c.parent.Value(key)
}

// Done implements context.Context; the first call arms the deadline timer
// and the watch on the parent.
func (c *Context) Done() <-chan struct{} {
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
func (c *Context) Err() error {
	c.mu.Lock()
	if c.err == nil && c.expireLocked() {
		err, after := c.err, c.endLocked()
		c.mu.Unlock()
		after.run()
		return err
	}
	defer c.mu.Unlock()
	return c.err
}

// expireLocked sets err once the deadline has passed or the parent ended;
// it reports whether it did so now.
func (c *Context) expireLocked() bool {
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

// Release ends the context (context.Canceled), as the CancelFunc of
// context.WithTimeout does; call it when the call returned. A nil c has
// nothing to end.
func (c *Context) Release() {
	if c != nil {
		c.end(context.Canceled)
	}
}

func (c *Context) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	after := c.endLocked()
	c.mu.Unlock()
	after.run()
}

// AfterFunc arranges for f to be called once c ends, and returns a stop
// function that cancels that: the method context.AfterFunc (and so
// context.WithCancel, and a store watching its calls' contexts) uses
// when a parent has it, in place of a goroutine per watch that waits on
// Done. f is called by the goroutine that ends c (c.Release, an Err
// past the deadline, the deadline timer's or the parent watch's), not
// under c's lock; stop returns whether it kept f from being called. On a
// c already ended, f is called in a goroutine of its own.
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	c.Done() // arms the deadline timer and the parent watch
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{c: c, f: f, next: c.after}
	c.after = a
	return a.stop
}

// afterFunc is a function AfterFunc arranged to call, in c's list.
type afterFunc struct {
	c    *Context
	f    func()
	next *afterFunc
}

// run calls the functions of the list a heads (none for a nil a).
func (a *afterFunc) run() {
	for ; a != nil; a = a.next {
		a.f()
	}
}

// stop takes a off its context's list; it reports whether a was there.
func (a *afterFunc) stop() bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	for p := &a.c.after; *p != nil; p = &(*p).next {
		if *p == a {
			*p = a.next
			return true
		}
	}
	return false
}

// endLocked closes Done (in the same hold of c.mu that set err, so Err is
// never set while Done is open), stops the timer and the parent watch, and
// returns AfterFunc's functions, for the caller to call once it has
// unlocked c.mu.
func (c *Context) endLocked() *afterFunc {
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
	after := c.after
	c.after = nil
	return after
}
