package connector

import (
	"context"
	"sync"
	"time"

	"github.com/xagentkit/imv2/clock"
)

// StoreLossGrace is how long a replica (a Connector with Advanced.Relay)
// may go without reaching its Store before it lets xAgent's connection
// go: it reads the Store every storeWatchPeriod, and once every read for
// StoreLossGrace failed it closes xAgent's connections, refuses new ones
// (503) and answers /readyz "store unreachable", so xAgent reconnects to
// a replica that can serve the channel instead of holding one whose every
// final and channel.open is refused. The first read that succeeds takes
// connections again. xAgent's connection is thus let go at most
// StoreLossGrace plus two periods after the Store became unreachable.
const StoreLossGrace = 3 * time.Second

// storeWatchPeriod is how often the watch reads the Store, and the bound
// of each read.
const storeWatchPeriod = time.Second

// storeWatch is a replica's watch on its Store's reachability.
type storeWatch struct {
	c *Connector

	mu      sync.Mutex
	stopped bool
	timer   clock.Timer
	failing time.Time // when the first of the failing reads began (zero: the last read passed)
	lost    bool      // xAgent's connections are refused
	running sync.WaitGroup
}

// watchStore starts c's watch; stop ends it.
func (c *Connector) watchStore() *storeWatch {
	w := &storeWatch{c: c}
	w.mu.Lock()
	w.timer = c.clock.AfterFunc(storeWatchPeriod, w.check)
	w.mu.Unlock()
	return w
}

// isLost reports whether the watch let xAgent's connections go; false
// for a nil watch (not a replica).
func (w *storeWatch) isLost() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// check reads the Store once (the probe channel's registration, a read
// on every Store) and lets go of, or takes again, xAgent's connections.
// It runs on the clock's goroutine.
func (w *storeWatch) check() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.running.Add(1)
	w.mu.Unlock()
	defer w.running.Done()
	c := w.c
	began := c.clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), storeWatchPeriod)
	_, err := c.counted.Known(ctx, readyProbeChannel)
	cancel()
	now := c.clock.Now()
	w.mu.Lock()
	var letGo, takeAgain bool
	switch {
	case err == nil:
		w.failing = time.Time{}
		takeAgain, w.lost = w.lost, false
	default:
		if w.failing.IsZero() {
			w.failing = began
		}
		if !w.lost && now.Sub(w.failing) >= StoreLossGrace {
			letGo, w.lost = true, true
		}
	}
	failing := w.failing
	if !w.stopped {
		w.timer = c.clock.AfterFunc(max(0, began.Add(storeWatchPeriod).Sub(c.clock.Now())), w.check)
	}
	w.mu.Unlock()
	switch {
	case letGo:
		c.log.Warn("connector: store unreachable; letting xAgent's connections go and refusing new ones until it answers",
			"unreachable", now.Sub(failing).Round(time.Millisecond), "err", err)
		c.server.SetUnavailable("store unreachable")
	case takeAgain:
		c.log.Warn("connector: store reachable again; taking xAgent's connections")
		c.server.SetUnavailable("")
	}
}

// stop ends the watch, waiting for a read in flight.
func (w *storeWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.running.Wait()
}
