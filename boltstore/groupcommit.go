package boltstore

import (
	"errors"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// maxGroup bounds the calls that share one write transaction, so one
// commit's work (and the wait of the calls queued behind it) stays short.
const maxGroup = 256

// groupCommit lets concurrent write calls share one transaction and one
// fsync. There is no timer: a call that finds no commit under way runs at
// once, alone; calls that arrive while a commit is under way queue, and
// the first of them leads the next commit for all of them (at most
// maxGroup). So one channel's calls pay what they paid before, and under
// load a call waits at most for the commit under way plus its own group's
// (one more per maxGroup calls queued ahead of it). Every call returns
// after the commit that holds its write, fsync included.
//
// bbolt's DB.Batch does the same with a delay timer (10 ms by default), a
// wait that a single channel's calls, one after another, would pay each
// time.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*commitCall // the calls not yet committed, oldest first
	leading bool          // a call is running a commit; false only with queue empty
	commits atomic.Int64  // transactions committed, for the tests
}

// errGroupPanic is the outcome of the calls whose group's transaction
// was abandoned because another call's function panicked.
var errGroupPanic = errors.New("boltstore: a write in the same commit panicked; nothing was written")

// commitCall is one write call: its function, and its outcome once done.
type commitCall struct {
	fn  func(*bolt.Tx) error
	err error
	// lead receives true when this call is to run the next group, false
	// when its group committed and err is its outcome.
	lead chan bool
}

// update runs fn in a write transaction, perhaps shared with concurrent
// calls, committed with fsync before update returns. fn must leave no
// trace when it returns an error, and be safe to run again: when an fn of
// a group fails, the transaction rolls back and the others run again
// without it (its error stands: it is what it found after the calls
// before it). An fn that returns errNoChange wrote nothing; update
// returns nil for it, and a group in which no fn wrote rolls back, which
// spares the fsync of an empty commit.
func (g *groupCommit) update(db *bolt.DB, fn func(*bolt.Tx) error) error {
	c := &commitCall{fn: fn, lead: make(chan bool, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if !lead && !<-c.lead {
		return c.err
	}
	// c is queue[0]: a leader is always the oldest call.
	g.mu.Lock()
	group := g.queue[:min(len(g.queue), maxGroup)]
	g.queue = g.queue[len(group):]
	g.mu.Unlock()

	// Whatever happens in the group, even a panic in an fn (which goes
	// on up this caller's stack, as db.Update's would), the next group
	// gets a leader and the others of this one their outcome.
	committed := false
	defer func() {
		g.mu.Lock()
		if len(g.queue) > 0 {
			g.queue[0].lead <- true
		} else {
			g.leading = false
			g.queue = nil // let the old backing array go
		}
		g.mu.Unlock()
		for _, o := range group[1:] {
			if !committed {
				o.err = errGroupPanic
			}
			o.lead <- false
		}
	}()
	g.commitGroup(db, group)
	committed = true
	return c.err
}

// commitGroup runs the group's functions in one transaction and sets
// each call's err.
func (g *groupCommit) commitGroup(db *bolt.DB, group []*commitCall) {
	run := group
	for {
		tx, err := db.Begin(true)
		if err != nil {
			for _, c := range run {
				c.err = err
			}
			return
		}
		ended := false
		defer func() {
			if !ended {
				_ = tx.Rollback() // an fn panicked: release the writer lock
			}
		}()
		wrote := false
		failed := -1
		for i, c := range run {
			err := c.fn(tx)
			if errors.Is(err, errNoChange) {
				c.err = nil
				continue
			}
			if err != nil {
				c.err, failed = err, i
				break
			}
			c.err, wrote = nil, true
		}
		if failed >= 0 {
			// The failed call's partial writes go with the rest; the
			// others run again without it.
			_ = tx.Rollback()
			ended = true
			run = append(run[:failed:failed], run[failed+1:]...)
			if len(run) == 0 {
				return
			}
			continue
		}
		ended = true
		if !wrote {
			_ = tx.Rollback()
			return
		}
		if err := tx.Commit(); err != nil {
			for _, c := range run {
				c.err = err
			}
			return
		}
		g.commits.Add(1)
		return
	}
}
