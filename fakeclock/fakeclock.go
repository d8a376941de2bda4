// Package fakeclock is an clock.Clock whose time moves only when a test says
// so. Timers fire synchronously inside Advance, in deadline order, so a test
// of retries, TTLs or activity timeouts never sleeps.
package fakeclock

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/xagentkit/imv2/clock"
)

// Clock is a manual clock.Clock. The zero value is not usable; call New.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*timer
	armed  chan struct{} // closed by the next AfterFunc; nil until BlockUntil waits
}

type timer struct {
	c    *Clock
	at   time.Time
	seq  uint64
	f    func()
	done bool
}

// New returns a clock set to start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the clock is advanced past now+d.
// Unlike time.AfterFunc, f runs in the goroutine that calls Advance.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	if c.armed != nil {
		close(c.armed)
		c.armed = nil
	}
	return t
}

// Stop implements clock.Timer.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves the clock forward by d, firing every timer that falls due,
// earliest first; timers scheduled by fired callbacks fire too if they fall
// due within the same advance.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		next := c.nextDue(end)
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		next.done = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// nextDue returns the earliest live timer due by end and prunes dead ones.
func (c *Clock) nextDue(end time.Time) *timer {
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.done {
			live = append(live, t)
		}
	}
	for i := len(live); i < len(c.timers); i++ {
		c.timers[i] = nil
	}
	c.timers = live
	sort.Slice(live, func(i, j int) bool {
		if !live[i].at.Equal(live[j].at) {
			return live[i].at.Before(live[j].at)
		}
		return live[i].seq < live[j].seq
	})
	if len(live) == 0 || live[0].at.After(end) {
		return nil
	}
	return live[0]
}

// Pending returns the number of timers not yet fired or stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pendingLocked()
}

func (c *Clock) pendingLocked() int {
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// BlockUntil returns once at least n timers are pending (armed, not yet
// fired or stopped), or with ctx's error when ctx ends first. A test calls
// it to advance the clock right after another goroutine armed its timer,
// instead of sleeping to let that goroutine run. It is woken by AfterFunc,
// never by polling.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if c.pendingLocked() >= n {
			c.mu.Unlock()
			return nil
		}
		if c.armed == nil {
			c.armed = make(chan struct{})
		}
		armed := c.armed
		c.mu.Unlock()
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
