package imv2

import "context"

// AdoptPending loads the pending entries of this channel that the
// PendingStore holds and the Channel does not yet track, in the store's
// order, and sends them as Send would. It is for a PendingStore shared by
// replicas: a user message accepted on a replica that does not hold the
// connection is added to the shared store there, and the replica holding
// the connection adopts it when told (pgstore.Follow calls this on a
// notification). Entries already tracked are left as they are, so calling
// it again is harmless. It returns how many entries it adopted.
func (c *Channel) AdoptPending(ctx context.Context) (int, error) {
	if c.isClosed() {
		return 0, ErrClosed
	}
	entries, err := c.o.Pending.List(ctx, c.id)
	if err != nil {
		return 0, err
	}
	adopted := 0
	c.mu.Lock()
	for _, e := range entries {
		if c.closed {
			break
		}
		if c.out[e.Message.MessageID] != nil || c.removing(e.Message.MessageID) {
			continue // tracked, or acknowledged and its Remove queued
		}
		payload, err := marshalChatMessage(&e.Message)
		if err != nil {
			c.log.Error("pending entry not adoptable", "message_id", e.Message.MessageID, "err", err)
			continue
		}
		o := &outgoing{entry: e, payload: payload}
		c.trackLocked(o)
		adopted++
		c.admitLocked(o) // queued to transmit if admitted
	}
	c.mu.Unlock()
	c.drain(nil) // arms the expiry instead while disconnected
	return adopted, nil
}

// resolvedElsewhere reports whether the store no longer holds a message
// this Channel still tracks: with a PendingStore shared by replicas,
// another replica held the connection, got the terminal ack, removed the
// entry and reported it. Asked only when the message would expire while
// disconnected here, so a copy left behind by a failover is not reported
// failed a second time. A store error counts as "still held".
func (c *Channel) resolvedElsewhere(o *outgoing) bool {
	sctx := c.storeCtx(c.o.Pending)
	defer sctx.Release()
	entries, err := c.o.Pending.List(c.call(sctx), c.id)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Message.MessageID == o.entry.Message.MessageID {
			return false
		}
	}
	return true
}

// forget stops tracking o without touching the store or reporting it.
func (c *Channel) forget(o *outgoing) {
	next, ok := c.untrack(o)
	if !ok {
		return
	}
	c.log.Debug("pending message resolved by another replica; forgotten here", "message_id", o.entry.Message.MessageID)
	if next != nil {
		c.drain(nil) // next was queued as it was admitted
	}
}
