package imv2

import "context"

// Store calls off the connection's reader.
//
// A Channel's Receive runs on its connection's one reader goroutine
// (dataplane dispatches there), shared by every channel of the
// connection. Two store calls used to run there: the completed-store
// Lookup of each stream's first delta (D11) and the pending-store Remove
// of each ack. A slow or locked table then held the whole connection: a
// 20 s lock on the completed table stopped every channel's finals and
// user messages for 20 s. Both now run on a goroutine of the channel
// (Channel.spawnLocked, which Close waits for), each with the store
// deadline (storeTimeout, on the Channel's clock), so one slow channel or
// table holds neither the connection nor the other channels. The
// in-memory stores answer at once and keep running inline.

// removals is a channel's queue of pending-store Removes of messages
// already acknowledged, run one at a time off the reader. It is bounded
// by the pending store itself: each queued Remove is an entry still
// stored, and the store holds at most PendingCap of a channel's. Made on
// first use: a channel with an in-memory store never has one.
type removals struct {
	queue   []string
	running bool
	// done holds, per message_id queued, a channel closed once its Remove
	// returned: a Send of the same message_id waits for it, so the old
	// Remove never deletes the new entry.
	done map[string]chan struct{}
}

// inlineStore reports whether store is one of this package's in-memory
// stores, whose calls do no I/O and run where they are made.
func inlineStore(store any) bool {
	switch store.(type) {
	case *memoryCompletedStore, *memoryPendingStore:
		return true
	}
	return false
}

// removePending removes the pending entry of id, acknowledged or failed
// for good: at once for an in-memory store, else queued for the channel's
// remover goroutine. A Remove still queued when the channel closes is
// not made: the entry is resent after a restart and answered duplicate
// by the receiver's completed record (S2), as after a crash.
func (c *Channel) removePending(id string) {
	if inlineStore(c.o.Pending) {
		if err := c.o.Pending.Remove(context.Background(), c.id, id); err != nil {
			c.log.Error("pending entry not removed", "message_id", id, "err", err)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.rm == nil {
		c.rm = &removals{done: map[string]chan struct{}{}}
	}
	if _, queued := c.rm.done[id]; !queued {
		c.rm.done[id] = make(chan struct{})
		c.rm.queue = append(c.rm.queue, id)
	}
	if !c.rm.running {
		c.rm.running = c.spawnLocked(c.runRemovals)
	}
}

// runRemovals makes the queued Removes, oldest first, until none is left
// or the channel closes.
func (c *Channel) runRemovals() {
	for {
		c.mu.Lock()
		rm := c.rm
		if len(rm.queue) == 0 || c.closed {
			rm.running = false
			c.mu.Unlock()
			return
		}
		id := rm.queue[0]
		rm.queue[0] = ""
		rm.queue = rm.queue[1:]
		c.mu.Unlock()

		sctx := c.storeCtx(c.o.Pending)
		if err := c.o.Pending.Remove(sctx.call(), c.id, id); err != nil {
			c.log.Error("pending entry not removed", "message_id", id, "err", err)
		}
		sctx.release()

		c.mu.Lock()
		close(rm.done[id])
		delete(rm.done, id)
		if len(rm.queue) == 0 {
			rm.queue = nil // the array goes with the backlog
		}
		c.mu.Unlock()
	}
}

// removing reports whether a Remove of id is queued: the message was
// acknowledged and its entry, still stored, is not to be adopted again
// (AdoptPending). c.mu is held.
func (c *Channel) removing(id string) bool {
	if c.rm == nil {
		return false
	}
	_, queued := c.rm.done[id]
	return queued
}

// awaitRemoval waits until no Remove of id is queued, so a Send of a
// message_id whose earlier entry is still being removed adds its entry
// after that Remove.
func (c *Channel) awaitRemoval(ctx context.Context, id string) error {
	c.mu.Lock()
	var done chan struct{}
	if c.rm != nil {
		done = c.rm.done[id]
	}
	c.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// checkCompleted asks the completed store, off the reader, whether the
// message of a new delta stream is complete already (D11): then the
// stream is dropped and its deltas ignored; else its drafts, held back
// meanwhile, start. A store error counts as not complete, as before: the
// final's delivery asks the store again before anything is posted.
func (c *Channel) checkCompleted(id string, s *deltaStream) {
	sctx := c.storeCtx(c.o.Completed)
	_, done, err := c.o.Completed.Lookup(sctx.call(), c.id, id)
	sctx.release()
	c.mu.Lock()
	s.checking = false
	if err == nil && done {
		if c.deltas[id] == s {
			delete(c.deltas, id)
			c.releaseLocked(s.held)
			s.held = 0
		}
		s.final = true // no draft of it, ever
		c.mu.Unlock()
		c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
		return
	}
	c.startDraftsLocked(id, s)
	c.mu.Unlock()
}

// startDraftsLocked starts the stream's draft lane if a draft waits and
// none runs, and the stream is neither being checked nor finished.
// c.mu is held.
func (c *Channel) startDraftsLocked(id string, s *deltaStream) {
	if !s.hasDraft || s.drafting || s.checking || s.final {
		return
	}
	s.drafting = true
	s.idle = make(chan struct{})
	if !c.spawnLocked(func() { c.showDrafts(id, s) }) {
		s.drafting = false
		close(s.idle)
	}
}
