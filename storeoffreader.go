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
// that ended (acknowledged, or failed for good), run one at a time off
// the reader, each followed by the message's outcome (OnDelivered or
// OnFailed), so a caller told of the outcome finds the entry gone, as
// with an in-memory store. The queue is bounded by the pending store
// itself: each queued Remove is an entry still stored, and the store
// holds at most PendingCap of a channel's. Made on first use: a channel
// with an in-memory store never has one.
type removals struct {
	queue   []removal
	running bool
	// done holds, per message_id queued, a channel closed once its Remove
	// returned: a Send of the same message_id waits for it, so the old
	// Remove never deletes the new entry.
	done map[string]chan struct{}
}

type removal struct {
	id    string
	ended func() // tells the outcome
}

// inline is the property a store declares when its calls do no I/O and
// never wait on their context (a map behind a mutex): the Channel calls
// it where it is, on the connection's reader and with the Channel's own
// context (no store deadline, no clock read, no allocation), and does not
// pipeline its writes. The in-memory stores declare it; a store wrapping
// one does not (it may do more), nor does any store that waits on
// anything. The engine asks for the property, never for a type.
type inline interface{ inline() }

// inlineStore reports whether store declares inline.
func inlineStore(store any) bool {
	_, ok := store.(inline)
	return ok
}

// queueRemoval queues the Remove of id's entry, then ended, for the
// channel's remover goroutine. Once the channel closed, Removes are no
// longer made (Close would wait for each, up to the store timeout, with
// the database away); the outcome is still told. The entry left behind
// is resent after a restart and answered duplicate by the receiver's
// completed record (S2), as after a crash.
func (c *Channel) queueRemoval(id string, ended func()) {
	c.mu.Lock()
	if c.rm == nil {
		c.rm = &removals{done: map[string]chan struct{}{}}
	}
	rm := c.rm
	if _, queued := rm.done[id]; !queued {
		rm.done[id] = make(chan struct{})
	}
	rm.queue = append(rm.queue, removal{id, ended})
	if !rm.running {
		rm.running = c.spawnLocked(c.runRemovals)
	}
	if rm.running {
		c.mu.Unlock()
		return
	}
	// Closed: no goroutine may start; tell the outcomes here.
	q := rm.queue
	rm.queue = nil
	for _, r := range q {
		if done := rm.done[r.id]; done != nil {
			close(done)
			delete(rm.done, r.id)
		}
	}
	c.mu.Unlock()
	for _, r := range q {
		r.ended()
	}
}

// runRemovals makes the queued Removes, oldest first, each followed by
// its outcome, until none is left.
func (c *Channel) runRemovals() {
	for {
		c.mu.Lock()
		rm := c.rm
		if len(rm.queue) == 0 {
			rm.running = false
			rm.queue = nil // the array goes with the backlog
			c.mu.Unlock()
			return
		}
		r := rm.queue[0]
		rm.queue[0] = removal{}
		rm.queue = rm.queue[1:]
		closed := c.closed
		c.mu.Unlock()

		if !closed {
			c.remove(r.id)
		}

		c.mu.Lock()
		if done := rm.done[r.id]; done != nil {
			close(done)
			delete(rm.done, r.id)
		}
		c.mu.Unlock()
		r.ended()
	}
}

// remove removes the entry of acknowledged message id, trying a Remove
// that failed (a pool out of connections, a store away) again with
// backoff on the Channel's clock until it succeeds or the channel
// closes: an entry left behind would stay stored though acknowledged
// (resent, and answered duplicate, only after a restart).
func (c *Channel) remove(id string) {
	for wait := recordRetryMin; ; wait = min(2*wait, recordRetryMax) {
		sctx := c.storeCtx(c.o.Pending)
		err := c.o.Pending.Remove(c.call(sctx), c.id, id)
		sctx.Release()
		if err == nil {
			return
		}
		c.log.Warn("pending entry not removed; trying again", "message_id", id, "err", err)
		if !c.sleep(wait) {
			c.log.Error("pending entry not removed; it is resent after a restart and answered duplicate", "message_id", id, "err", err)
			return
		}
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
	_, done, err := c.o.Completed.Lookup(c.call(sctx), c.id, id)
	sctx.Release()
	c.mu.Lock()
	s.checking = false
	if err == nil && done {
		if c.deltas[id] == s {
			delete(c.deltas, id)
			c.releaseLocked(s.held)
			s.held = 0
		}
		s.final = true // no draft of it, ever
		c.settlePlaceLocked(s.place)
		c.mu.Unlock()
		c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
		return
	}
	c.startDraftsLocked(id, s)
	c.mu.Unlock()
}

// maxRefusalChecks bounds, per channel, the deltas waiting off the reader
// for the completed store to say whether they are late (ignored) or
// refused; beyond it a delta is refused at once.
const maxRefusalChecks = 16

// refuseUnlessCompletedLocked answers, off the reader, a delta that
// would start no stream (rej: a gap, a limit): ignored if its message is
// complete already (D11: a late delta after the final, a replayed stream),
// else refused with rej, as the in-memory store's inline Lookup decides.
// It reports false when too many such checks run: the caller refuses at
// once. c.mu is held.
func (c *Channel) refuseUnlessCompletedLocked(p *Packet, id string, rej *Error) bool {
	if c.refusals >= maxRefusalChecks {
		return false
	}
	c.refusals++
	ok := c.spawnLocked(func() {
		sctx := c.storeCtx(c.o.Completed)
		_, done, err := c.o.Completed.Lookup(c.call(sctx), c.id, id)
		sctx.Release()
		c.mu.Lock()
		c.refusals--
		c.mu.Unlock()
		if err == nil && done {
			c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
			return
		}
		_ = c.rejectDelta(p, id, rej)
	})
	if !ok {
		c.refusals--
	}
	return ok
}

// startDraftsLocked starts the stream's draft lane if a draft waits and
// none runs, and the stream is neither being checked nor finished.
// c.mu is held.
func (c *Channel) startDraftsLocked(id string, s *deltaStream) {
	if !s.hasDraft || s.drafting || s.checking || s.final || s.noDrafts {
		return
	}
	s.drafting = true
	s.idle = make(chan struct{})
	if !c.spawnLocked(func() { c.showDrafts(id, s) }) {
		s.drafting = false
		close(s.idle)
	}
}
