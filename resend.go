package imv2

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// outgoing is one pending message of this channel's sender side (S1): the
// content to resend verbatim, the packet IDs of its recent transmissions
// (an ack for any of them resolves it, A1) and the timer of its next step.
type outgoing struct {
	entry     PendingEntry
	payload   []byte   // the encoded payload, reused by every resend
	packetIDs []string // newest last, at most maxTransmissions
	attempt   int
	inWindow  bool      // admitted to the send window: transmitted and retried
	seq       uint64    // the order Send took it in: transmissions go out in this order
	queued    bool      // in the channel's transmit queue (txq)
	ids       [2]string // packetIDs' first backing array: no allocation for the usual one or two
	first     Packet    // the first transmission's packet: no allocation for it
	firstID   string    // the first transmission's packet ID, if made with the message ID

	// The next step, in the channel's deadlines (deadlines.go).
	due     time.Time
	dueSeq  uint64
	step    dueStep
	heapIdx int // index in the heap + 1; 0: nothing scheduled
}

// dequeuedHook, set only by tests, runs in drain with c.mu released
// after a message left the transmit queue, before it is transmitted: the
// moment a SetTransport of another goroutine may come (send order).
var dequeuedHook atomic.Pointer[func(c *Channel, messageID string)]

// maxTransmissions bounds the packet IDs remembered per pending message:
// an ack for an older transmission is rare and only delays the resolution.
const maxTransmissions = 8

// Send queues a complete message for delivery and transmits it: on a
// Connector a user message, on xAgent an assistant final. An empty
// MessageID is generated (M2). The message stays pending until a terminal
// ack: it is resent with the same message_id and content after an ack
// timeout, a disconnect or a retryable rejection, with exponential backoff
// and jitter (S2, A5, A7); a rejection with retryable=false ends it and is
// reported through Options.OnFailed (S3). Send returns once the message is
// pending, not once it is delivered.
//
// A full queue returns an *Error with code pending_full and queues
// nothing. A message the transport can never carry (over its frame limit)
// fails at once: Send returns the error, and OnFailed is told too. Sending a message_id that is already pending with the same
// content is a no-op; with other content it is message_id_conflict.
func (c *Channel) Send(ctx context.Context, m ChatMessage) (string, error) {
	out := c.role.inbound().reverse()
	if !c.neg.Load().Allows(TypeChatMessage, out) {
		return "", Errorf(CodeUnsupportedPacket, "chat.message is not negotiated on channel %q", c.id)
	}
	firstPacketID := ""
	if m.MessageID == "" {
		m.MessageID, firstPacketID = newMessageAndPacketID()
	}
	if err := m.Validate(out); err != nil {
		return "", err
	}
	if c.isClosed() {
		return "", ErrClosed
	}
	payload, err := marshalChatMessage(&m)
	if err != nil {
		return "", Errorf(CodeInvalidPacket, "chat.message: %s", jsonErrText(err))
	}
	e := PendingEntry{ChannelID: c.id, Message: m, Created: c.o.Clock.Now()}
	if err := c.awaitRemoval(ctx, m.MessageID); err != nil {
		return "", err
	}
	if err := c.o.Pending.Add(ctx, e); err != nil {
		return "", err
	}
	c.mu.Lock()
	if old := c.out[m.MessageID]; old != nil {
		c.mu.Unlock()
		return m.MessageID, nil // already pending with this content (the store checked)
	}
	o := &outgoing{entry: e, payload: payload, firstID: firstPacketID}
	o.packetIDs = o.ids[:0]
	c.trackLocked(o)
	if !c.admitLocked(o) {
		c.mu.Unlock()
		return m.MessageID, nil // pending; sent when the window has room
	}
	c.mu.Unlock()
	if fail := c.drain(o); fail != nil {
		return m.MessageID, fail
	}
	return m.MessageID, nil
}

// trackLocked makes o one of the channel's pending messages, the last
// in send order. c.mu must be held.
func (c *Channel) trackLocked(o *outgoing) {
	if c.out == nil {
		c.out = map[string]*outgoing{}
	}
	ord := c.orderLocked()
	ord.seq++
	o.seq = ord.seq
	c.out[o.entry.Message.MessageID] = o
}

// admitLocked puts o in the send window if it has room, else at the end
// of the waiting line (its pending TTL still runs). The window keeps the
// unacknowledged transmissions of a channel near what a receiver accepts
// at once (MaxUnacked), so a long backlog is sent as acks come back
// instead of being resent over and over. c.mu must be held.
func (c *Channel) admitLocked(o *outgoing) bool {
	if c.unacked < c.o.MaxUnacked && len(c.waiting) == 0 {
		o.inWindow = true
		c.unacked++
		c.queueLocked(o)
		return true
	}
	c.waiting = append(c.waiting, o)
	c.armExpiryLocked(o)
	return false
}

// nextWaitingLocked admits the oldest waiting message still pending, if
// the window has room. c.mu must be held.
func (c *Channel) nextWaitingLocked() *outgoing {
	for len(c.waiting) > 0 && c.unacked < c.o.MaxUnacked {
		o := c.waiting[0]
		c.waiting[0] = nil
		c.waiting = c.waiting[1:]
		if c.out[o.entry.Message.MessageID] != o {
			continue // ended while waiting (expired, dropped)
		}
		c.unscheduleLocked(o)
		o.inWindow = true
		c.unacked++
		c.queueLocked(o)
		return o
	}
	return nil
}

// queueLocked puts o in the transmit queue, in send order (seq), unless
// it is there already. Every transmission goes through the queue, and a
// message joins it in the same hold of c.mu that admitted it to the
// window, so a message admitted by an ack on the reader's goroutine is
// never overtaken by one Send admits at the same time on another: the
// peer gets a channel's messages in the order Send took them (S2, the
// order rule of the package doc). c.mu must be held.
func (c *Channel) queueLocked(o *outgoing) {
	if o.queued {
		return
	}
	o.queued = true
	ord := c.orderLocked()
	i, _ := slices.BinarySearchFunc(ord.txq, o.seq, func(q *outgoing, seq uint64) int { return cmp.Compare(q.seq, seq) })
	ord.txq = slices.Insert(ord.txq, i, o)
}

// drain transmits the queued messages, oldest first. While another
// goroutine is doing so (it sends what was queued meanwhile too, also
// when the Transport calls back into the channel), drain(nil) returns at
// once and drain(mine) waits until mine went out, so Send returns only
// after its message was handed to the Transport, as a Reply's deltas that
// follow it expect. It returns the error that ended mine for good, when
// this call transmitted it.
func (c *Channel) drain(mine *outgoing) *Error {
	var fail *Error
	c.mu.Lock()
	ord := c.orderLocked()
	for ord.draining {
		if mine == nil || (!mine.queued && ord.sending != mine) {
			c.mu.Unlock()
			return nil
		}
		ord.sent.Wait()
	}
	ord.draining = true
	for len(ord.txq) > 0 {
		o := ord.txq[0]
		n := copy(ord.txq, ord.txq[1:])
		ord.txq[n] = nil
		ord.txq = ord.txq[:n]
		o.queued = false
		ord.sending = o
		// Decided in the hold of c.mu that took o off the queue: a
		// transport set after this (SetTransport queues every message in
		// the window again, in send order) never carries o ahead of the
		// earlier messages it queues.
		tx := c.prepareLocked(o)
		c.mu.Unlock()
		if h := dequeuedHook.Load(); h != nil {
			(*h)(c, o.entry.Message.MessageID)
		}
		if f := c.transmitOne(o, tx); o == mine {
			fail = f
		}
		c.mu.Lock()
		ord.sending = nil
		ord.sent.Broadcast()
	}
	ord.draining = false
	ord.sent.Broadcast()
	c.mu.Unlock()
	return fail
}

// Pending returns the messages of this channel still waiting for a
// terminal ack, oldest first.
func (c *Channel) Pending(ctx context.Context) ([]PendingEntry, error) {
	return c.o.Pending.List(ctx, c.id)
}

// restorePending loads the store's entries for this channel after a
// restart; they are transmitted when a transport is set.
func (c *Channel) restorePending() error {
	entries, err := c.o.Pending.List(c.ctx, c.id)
	if err != nil {
		return err
	}
	for _, e := range entries {
		payload, err := marshalChatMessage(&e.Message)
		if err != nil {
			return Errorf(CodeInvalidPacket, "pending %q: %s", e.Message.MessageID, jsonErrText(err))
		}
		o := &outgoing{entry: e, payload: payload}
		o.packetIDs = o.ids[:0]
		c.mu.Lock()
		c.trackLocked(o)
		if c.admitLocked(o) && c.transport == nil {
			c.armExpiryLocked(o)
		}
		c.mu.Unlock()
	}
	if c.transport != nil && len(entries) > 0 {
		t := c.transport
		c.transport = nil
		c.SetTransport(t)
	}
	return nil
}

// transmit queues o to be sent once more and drains the queue (drain):
// a resend goes out in send order too.
func (c *Channel) transmit(o *outgoing) *Error {
	c.mu.Lock()
	c.queueLocked(o)
	c.mu.Unlock()
	return c.drain(o)
}

// transmission is what drain decided to do with a message it took off
// the transmit queue: send p on t, fail it as expired, or nothing (no
// transport, not in the window, ended).
type transmission struct {
	t       Transport
	p       *Packet
	attempt int
	expired bool
}

// prepareLocked decides o's transmission in the hold of c.mu that took
// it off the transmit queue: with a fresh packet_id (a packet_id names
// one transmission, I4) on the transport of that moment, its ack timeout
// armed. Deciding later, on the transport of a later moment, would let o
// overtake the earlier messages a SetTransport in between queued (the
// order rule). c.mu is held.
func (c *Channel) prepareLocked(o *outgoing) transmission {
	id := o.entry.Message.MessageID
	if c.closed || c.out[id] != o {
		return transmission{}
	}
	now := c.o.Clock.Now()
	if c.o.PendingTTL > 0 && now.Sub(o.entry.Created) >= c.o.PendingTTL {
		return transmission{t: c.transport, expired: true}
	}
	t := c.transport
	if t == nil || !o.inWindow {
		c.armExpiryLocked(o) // sent on reconnect (A5) or when admitted
		return transmission{}
	}
	// A resend gets a packet of its own: a Transport may still hold the
	// first (an in-memory one hands it to the peer).
	p, pid := &o.first, o.firstID
	if o.attempt > 0 {
		p, pid = new(Packet), ""
	}
	if pid == "" {
		pid = NewPacketID()
	}
	*p = Packet{
		Schema:             PacketSchema,
		PacketID:           pid,
		ConnectorChannelID: c.id,
		Type:               TypeChatMessage,
		Time:               now.UnixMilli(),
		Payload:            o.payload,
	}
	if len(o.packetIDs) == maxTransmissions {
		o.packetIDs = slices.Delete(o.packetIDs, 0, 1)
	}
	o.packetIDs = append(o.packetIDs, p.PacketID)
	o.attempt++
	c.scheduleLocked(o, now.Add(c.o.AckTimeout), stepAckTimeout)
	return transmission{t: t, p: p, attempt: o.attempt}
}

// transmitOne carries out tx, o's transmission prepareLocked decided. It
// returns the error that ended the message for good during this call, if
// any (already reported through OnFailed).
func (c *Channel) transmitOne(o *outgoing, tx transmission) *Error {
	id := o.entry.Message.MessageID
	if tx.expired {
		if tx.t == nil && c.resolvedElsewhere(o) {
			c.forget(o) // another replica sharing the store resolved it (adopt.go)
			return nil
		}
		fail := &Error{Code: CodeExpired, Message: "no terminal ack within the pending TTL"}
		c.finish(o, nil, fail)
		return fail
	}
	if tx.p == nil {
		return nil
	}
	c.observe(Event{Kind: EventSent, MessageID: id, PacketType: tx.p.Type, Attempt: tx.attempt})
	if err := tx.t.Send(c.ctx, tx.p); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == CodeInvalidPacket && !e.Retryable {
			// The transport will never carry it (over its frame limit):
			// fail now instead of retrying until the TTL (S3).
			c.finish(o, nil, e)
			return e
		}
		c.log.Debug("send failed; will resend", "message_id", id, "err", err)
		c.retry(o, "send failed")
	}
	return nil
}

// retry schedules the next transmission of o after backoff (S2).
func (c *Channel) retry(o *outgoing, why string) {
	c.mu.Lock()
	id := o.entry.Message.MessageID
	if c.closed || c.out[id] != o {
		c.mu.Unlock()
		return
	}
	if c.transport == nil {
		c.armExpiryLocked(o) // SetTransport resends on reconnect; the TTL still runs
		c.mu.Unlock()
		return
	}
	d := c.backoff(o.attempt)
	c.scheduleLocked(o, c.o.Clock.Now().Add(d), stepTransmit)
	attempt := o.attempt
	c.mu.Unlock()
	c.observe(Event{Kind: EventRetry, MessageID: id, Attempt: attempt})
	c.log.Debug("resend scheduled", "message_id", id, "reason", why, "delay", d)
}

// armExpiryLocked makes o fail at the end of its pending TTL while no
// transport can carry it, so a channel that never comes back still
// reports its messages (S3) instead of keeping them silently.
func (c *Channel) armExpiryLocked(o *outgoing) {
	if c.o.PendingTTL < 0 { // no age limit: it waits for a transport or room
		c.unscheduleLocked(o)
		return
	}
	c.scheduleLocked(o, o.entry.Created.Add(c.o.PendingTTL), stepTransmit) // past: at once
}

// backoff returns the delay before resend number attempt+1: RetryMin
// doubled per attempt, capped at RetryMax, drawn from [d/2, d].
func (c *Channel) backoff(attempt int) time.Duration {
	d := c.o.RetryMin
	for i := 1; i < attempt && d < c.o.RetryMax; i++ {
		d *= 2
	}
	d = min(d, c.o.RetryMax)
	half := d / 2
	return half + rand.N(half+1)
}

// receiveAck resolves the pending message an ack answers (A1–A3, S1–S3).
// An ack that matches no transmission of a pending message with the same
// message_id resolves nothing (A2).
func (c *Channel) receiveAck(ctx context.Context, p *Packet) error {
	a, err := DecodeChatMessageAck(p)
	if err != nil {
		e := AsError(err, CodeInvalidPacket)
		c.reply(NewErrorPacket(p, e))
		return e
	}
	c.mu.Lock()
	o := c.out[a.MessageID]
	if o == nil || !slices.Contains(o.packetIDs, p.ReplyTo) {
		c.mu.Unlock()
		c.observe(Event{Kind: EventAckUnmatched, MessageID: a.MessageID, Status: a.Status})
		return nil
	}
	if a.Status == AckRejected && a.Retryable {
		c.mu.Unlock()
		c.retry(o, "rejected retryable: "+string(a.Code))
		return nil
	}
	c.mu.Unlock()
	c.finish(o, a, a.rejection())
	return nil
}

// finish ends a pending message: delivered (accepted, duplicate) or
// failed (rejected for good, expired). Only this removes it (S1, S3).
func (c *Channel) finish(o *outgoing, a *ChatMessageAck, fail *Error) {
	id := o.entry.Message.MessageID
	next, ok := c.untrack(o)
	if !ok {
		return
	}
	if next != nil {
		defer c.drain(nil) // next was queued as it was admitted
	}
	var status AckStatus
	if a != nil {
		status = a.Status
	}
	if !inlineStore(c.o.Pending) {
		// Off the reader; the outcome is told once the entry is gone,
		// as it is here (storeoffreader.go).
		c.queueRemoval(id, func() { c.tellOutcome(o, status, fail) })
		return
	}
	if err := c.o.Pending.Remove(context.Background(), c.id, id); err != nil {
		c.log.Error("pending entry not removed", "message_id", id, "err", err)
	}
	c.tellOutcome(o, status, fail)
}

// tellOutcome tells the outcome of a pending message whose entry was removed:
// delivered with status, or failed with fail.
func (c *Channel) tellOutcome(o *outgoing, status AckStatus, fail *Error) {
	id := o.entry.Message.MessageID
	if fail == nil {
		c.observe(Event{Kind: EventAcked, MessageID: id, Status: status, Attempt: o.attempt})
		if c.o.OnDelivered != nil {
			c.o.OnDelivered(c.id, o.entry.Message, status)
		}
		return
	}
	c.observe(Event{Kind: EventFailed, MessageID: id, Code: fail.Code, Attempt: o.attempt})
	c.log.Warn("message not delivered", "message_id", id, "code", fail.Code, "reason", fail.Message)
	if c.o.OnFailed != nil {
		c.o.OnFailed(c.id, o.entry.Message, fail)
	}
}

// untrack stops tracking o: it leaves the channel's map, its deadline and
// the send window, and the message waiting next for the window is
// returned to be transmitted. ok is false when o was tracked no more.
func (c *Channel) untrack(o *outgoing) (next *outgoing, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := o.entry.Message.MessageID
	if c.out[id] != o {
		return nil, false
	}
	delete(c.out, id)
	c.unscheduleLocked(o)
	if o.inWindow {
		c.unacked--
		next = c.nextWaitingLocked()
	}
	return next, true
}

// sortOutgoing orders resends in send order.
func sortOutgoing(os []*outgoing) {
	slices.SortFunc(os, func(a, b *outgoing) int { return cmp.Compare(a.seq, b.seq) })
}
