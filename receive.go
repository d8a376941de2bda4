package imv2

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/xagentkit/imv2/internal/answered"
	"github.com/xagentkit/imv2/internal/port"
	"github.com/xagentkit/imv2/internal/storectx"
)

// delivery is one message_id queued for or in its Target call (single
// flight, A6). Resends of the same content wait as waiters and are
// answered when it ends; a resend with other content is a conflict (S6).
type delivery struct {
	p       *Packet
	m       *ChatMessage
	fp      Fingerprint
	stream  *deltaStream
	place   *place    // where it stands in the channel's order (order.go)
	until   time.Time // when it stops waiting for the places before it
	waiters []*Packet
	held    int64 // Budget bytes of the message and its waiters
	// tctx is the Target call's context and ack the packet of the first
	// copy's ack, here to save two allocations; a Target may keep its
	// context and a Transport the packet (neither is reused).
	tctx   storectx.Context
	ack    Packet
	ackBuf [ackBufSize]byte // the ack's payload, if it fits
}

// ackBufSize is room for an accepted or duplicate ack's payload with a
// message_id of up to 64 bytes (ackSize: 64 bytes of slack for the
// names); anything longer is allocated.
const ackBufSize = 128

// queuedCost is what a queued copy of a message costs the Budget: its raw
// payload, the decoded message (no larger than the payload) and the
// structs around them.
func queuedCost(p *Packet) int64 { return 2*int64(len(p.Payload)) + 1024 }

// storeTimeout bounds a store call that must finish even while the
// channel closes: the completed record of a message already posted, the
// removal of an acknowledged pending entry (S8, S1).
const storeTimeout = 10 * time.Second

// storeCtx returns the context for such a call on store, not cancelled
// by Close: pass c.call(sctx) and release it when the call returned. A
// store that declares inline (the in-memory stores: a mutex, no I/O)
// never waits on its ctx, so its calls get the Channel's own context, for
// the connector_id it carries (internal/connid), and cost nothing: no
// clock read, no allocation (a nil *storectx.Context). A user's store
// wrapping a memory store declares nothing and gets a context per call,
// which it may keep (Go's context contract allows it).
func (c *Channel) storeCtx(store any) *storectx.Context {
	if inlineStore(store) {
		return nil
	}
	return storectx.New(c.o.Clock, c.ctx, storeTimeout)
}

// call is the context to pass a store call made with sctx: sctx itself,
// or for an in-memory store (nil sctx) the Channel's context.
func (c *Channel) call(sctx *storectx.Context) context.Context {
	if sctx == nil {
		return c.ctx
	}
	return sctx
}

// targetCtx returns the context of a Target call other than the post
// (WasPosted, UpdateDraft, SetActivity): ended by Close or after
// TargetTimeout on the Channel's clock. Release it when the call returned.
func (c *Channel) targetCtx() *storectx.Context {
	return storectx.NewTarget(c.o.Clock, c.ctx, c.o.TargetTimeout, storectx.Key{})
}

// receiveMessage handles an inbound chat.message: a final on a Connector,
// a user message on xAgent. The rules are the same both ways: dedupe by
// message_id only (M9, I4), one Target call at a time per message_id (A6),
// accepted only after the Target returned (M12), duplicate for a completed
// message with the same content and rejected for other content (S6),
// rejected with the Target's retryable kind on failure (A8, X5).
func (c *Channel) receiveMessage(ctx context.Context, p *Packet) error {
	m, err := DecodeChatMessage(p, c.role.inbound())
	if err != nil {
		e := AsError(err, CodeInvalidPacket)
		e = &Error{Code: e.Code, Message: e.Message} // a bad payload never succeeds on resend (A8)
		c.rejectInvalid(p, e)
		return e
	}
	id := m.MessageID
	fp := FingerprintOf(m)

	c.mu.Lock()
	if d := c.inflight[id]; d != nil {
		switch {
		case d.fp != fp:
			c.mu.Unlock()
			return c.reject(p, id, Errorf(CodeMessageIDConflict, "message_id %q is being delivered with other content", id))
		case len(d.waiters) >= c.o.MaxWaiters:
			c.mu.Unlock()
			return c.reject(p, id, &Error{Code: CodeChannelBusy, Message: "too many resends waiting", Retryable: true})
		case !c.reserveLocked(queuedCost(p)):
			c.mu.Unlock()
			return c.reject(p, id, &Error{Code: CodeChannelBusy, Message: "memory budget spent; try later", Retryable: true})
		}
		d.held += queuedCost(p) // the packet keeps the message decoded with it (decodedpayload.go)
		d.waiters = append(d.waiters, p)
		c.mu.Unlock()
		return nil
	}
	if len(c.inflight) >= c.o.MaxInflight {
		c.mu.Unlock()
		return c.reject(p, id, &Error{Code: CodeChannelBusy, Message: "too many deliveries queued", Retryable: true})
	}
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	// The final of an open stream takes over the stream's budget, whose
	// text it frees: a budget full of streams never refuses the finals
	// that would empty it. A running UpdateDraft may still read the old
	// buffer (unsafe.String) after this: the excess is one draft per stream
	// for at most TargetTimeout.
	stream := c.deltas[id]
	cost, credit := queuedCost(p), int64(0)
	if stream != nil {
		credit = stream.held
	}
	if cost > credit && !c.reserveLocked(cost-credit) {
		c.mu.Unlock()
		return c.reject(p, id, &Error{Code: CodeChannelBusy, Message: "memory budget spent; try later", Retryable: true})
	}
	if credit > cost {
		c.releaseLocked(credit - cost)
	}
	d := &delivery{p: p, m: m, fp: fp, held: cost}
	if stream != nil {
		d.place = stream.place
	} else {
		d.place = c.newPlaceLocked(id)
	}
	if c.inflight == nil {
		c.inflight = map[string]*delivery{}
	}
	c.inflight[id] = d
	// The final clears the message's delta state (D10, S5); its drafts are
	// finished before the final is posted, so the final wins (M11).
	d.stream = stream
	delete(c.deltas, id)
	if stream != nil {
		stream.final = true
		stream.held = 0
		stream.buf, stream.ends, stream.draft = nil, nil, "" // a running draft call keeps only its own copy
	}
	// The queue is in the order the messages started (order.go): a final
	// whose stream began first goes before one that came before it.
	i, _ := slices.BinarySearchFunc(c.queue, d.place.seq, func(q *delivery, seq uint64) int { return cmp.Compare(q.place.seq, seq) })
	c.queue = slices.Insert(c.queue, i, d)
	c.signalLocked()
	if !c.delivering {
		c.delivering = true
		c.spawnLocked(c.deliverQueue)
	}
	c.mu.Unlock()
	return nil
}

// deliverQueue runs the channel's Target calls one at a time, in arrival
// order, so a platform shows a channel's messages in the order they were
// sent (two finals of one tool loop, M14). A slow call delays the
// channel's later messages by at most TargetTimeout; other channels are
// not affected.
//
// With a store that does I/O, one final's Record and acks run while the
// next final is claimed and posted (deliver), so a channel's two store
// calls can share one commit of a group-committing store. What holds all
// the same:
//   - the Target calls of finals stay in arrival order and one at a time:
//     a final's post starts only after the previous one's returned;
//   - each final is claimed before its post and recorded before its acks;
//     a failed Record or a crash between post and Record leaves the claim
//     as before (orphan);
//   - acks and the ended count (the order of first drafts, showDrafts)
//     advance in arrival order: a final ends only after the one before it;
//   - the claim's renewal goes on until its Record ended;
//   - depth 2: one final recording while the next runs; the one after
//     waits until the first ended;
//   - Close waits for the loop and for the Record and acks still running.
func (c *Channel) deliverQueue() {
	c.mu.Lock()
	prev := c.recording
	c.recording = nil
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.closed {
			// A final still recording is the next loop's to wait for;
			// Close waits for it (deliver).
			c.recording = prev
			c.delivering = false
			c.mu.Unlock()
			return
		}
		d := c.queue[0]
		if !c.firstLocked(d.place) {
			// A message that started before it has not ended nor shown a
			// draft: wait for it, at most TargetTimeout (order.go).
			if d.until.IsZero() {
				d.until = c.o.Clock.Now().Add(c.o.TargetTimeout)
			}
			if c.waitSignal(d.until) || c.closed {
				c.mu.Unlock()
				continue
			}
		}
		// Shift rather than reslice: the array is reused by the next
		// message instead of a new one per message (at most MaxInflight).
		n := copy(c.queue, c.queue[1:])
		c.queue[n] = nil
		c.queue = c.queue[:n]
		c.mu.Unlock()
		prev = c.deliver(d, prev)
	}
}

// deliver runs the Target call of one message and answers every copy,
// after prev (the previous final's end; nil if it ended). It returns nil
// when the message ended, or a chan closed once its Record and acks,
// still running, ended (see deliverQueue); it returns only after prev.
func (c *Channel) deliver(d *delivery, prev chan struct{}) chan struct{} {
	id := d.m.MessageID
	c.mu.Lock()
	held := c.admitHeldLocked(id)
	c.mu.Unlock()
	var (
		status AckStatus
		rej    *Error
		post   posted
	)
	if held != nil {
		status, rej = AckRejected, held
	} else {
		status, rej, post = c.runTarget(d.m, d.fp, d.stream, &d.tctx)
		c.mu.Lock()
		c.settleHeldLocked(id, status, rej)
		c.mu.Unlock()
	}
	// Its post returned: the next message may go (order.go).
	c.mu.Lock()
	c.settlePlaceLocked(d.place)
	c.mu.Unlock()
	if !post.ok {
		if prev != nil {
			<-prev
		}
		c.end(d, status, rej)
		return nil
	}
	if !c.pipelines() {
		status, rej = c.record(id, d.fp, post)
		if prev != nil {
			<-prev
		}
		c.end(d, status, rej)
		return nil
	}
	done := make(chan struct{})
	c.wg.Add(1) // Close waits for it
	c.active.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.active.Add(-1)
		defer close(done)
		status, rej := c.record(id, d.fp, post)
		if prev != nil {
			<-prev // acks in order
		}
		c.end(d, status, rej)
	}()
	if prev != nil {
		<-prev // depth 2: the next final starts once this one is the only one recording
	}
	return done
}

// pipelines reports whether deliver records a final while the next one
// runs: not with an inline store, whose calls are cheap and synchronous
// (a goroutine per final would cost more than it saves).
func (c *Channel) pipelines() bool {
	return !inlineStore(c.o.Completed)
}

// end answers every copy of a message whose delivery ended with status.
func (c *Channel) end(d *delivery, status AckStatus, rej *Error) {
	p := d.p
	id := d.m.MessageID
	c.mu.Lock()
	delete(c.inflight, id)
	waiters := d.waiters
	c.releaseLocked(d.held)
	c.mu.Unlock()

	c.answerInto(&d.ack, d.ackBuf[:0], p, id, status, rej)
	for _, w := range waiters {
		if status == AckAccepted {
			c.answer(w, id, AckDuplicate, nil) // it was accepted once; this copy is a resend (A6)
			continue
		}
		c.answer(w, id, status, rej)
	}
	if a, ok := c.o.Observer.(answered.Observer); ok {
		a.Answered(c.id, id)
	}
}

// posted says whether a message's post succeeded (ok), so that it is
// still to be recorded.
type posted struct {
	ok      bool
	took    time.Duration
	renewal *claimRenewal // nil without a ClaimRenewer
}

// record records a posted message (complete), then ends its claim's
// renewal: the claim stays live until its Record ended.
func (c *Channel) record(id string, fp Fingerprint, post posted) (AckStatus, *Error) {
	status, rej := c.complete(id, fp, EventDelivered, AckAccepted, post.took)
	if post.renewal != nil {
		post.renewal.stop()
	}
	return status, rej
}

// claimOwner returns the owner c claims messages under: Options.ClaimOwner,
// or else a random ID (122 bits) made for c's first claim, so an idle
// channel holds none (BenchmarkIdleChannels).
func (c *Channel) claimOwner() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.o.ClaimOwner == "" {
		c.o.ClaimOwner = prefixedUUID("owner_")
	}
	return c.o.ClaimOwner
}

// runTarget decides the ack of a message: duplicate or conflict from the
// completed store, else the Target's outcome; post.ok when the post
// succeeded and the message is still to be recorded (record).
//
// With a ClaimStore the message is claimed before the Target runs and the
// claim completed by Record after it, so a crash in between leaves an
// orphaned claim; the resend of an orphan is posted again only when the
// Target says that is harmless (orphan). A Target refusal releases the
// claim: nothing was posted.
//
// The message's drafts and the activity clear are settled before the
// claim, so the final still follows them (M11, C6) and the claim's lease
// only has to cover what runs after it: at most a WasPosted check and the
// PostMessage, each bounded by TargetTimeout (Options.ClaimLease).
func (c *Channel) runTarget(m *ChatMessage, fp Fingerprint, stream *deltaStream, tctx *storectx.Context) (status AckStatus, rej *Error, post posted) {
	id := m.MessageID
	if stream != nil {
		stream.waitDrafts()
	}
	c.clearActivity() // a final clears the temporary status (C6)
	c.settleActivity()

	claims, _ := c.o.Completed.(ClaimStore)
	var (
		old   Fingerprint
		found bool
		cl    Claim
		err   error
		owner string
	)
	sctx := c.storeCtx(c.o.Completed)
	var claimed time.Time
	if claims != nil {
		if _, renews := claims.(ClaimRenewer); renews {
			claimed = c.o.Clock.Now() // the renewals count from here
		}
		owner = c.claimOwner()
		cl, err = claims.Claim(c.call(sctx), c.id, id, fp, owner, c.o.ClaimLease)
		old, found = cl.Fingerprint, cl.State == ClaimCompleted
	} else {
		old, found, err = c.o.Completed.Lookup(c.call(sctx), c.id, id)
	}
	sctx.Release()
	if err != nil {
		// e is declared here, not before the check: errors.As moves it to
		// the heap, an allocation per delivered final otherwise.
		if e := (*Error)(nil); errors.As(err, &e) && e.Code == CodeChannelBusy {
			return AckRejected, e, posted{} // a full store's refusal (completedshare.go): retry later
		}
		c.log.Warn("completed store lookup failed", "message_id", id, "err", err)
		return AckRejected, &Error{Code: CodeTargetDeliveryFailed, Message: "idempotency store unavailable", Retryable: true}, posted{}
	}
	if found {
		if !sameContent(old, m) { // a record of an earlier encoding too
			return AckRejected, Errorf(CodeMessageIDConflict, "message_id %q already completed with other content", id), posted{}
		}
		c.observe(Event{Kind: EventDuplicate, MessageID: id})
		return AckDuplicate, nil, posted{}
	}
	var renewal *claimRenewal
	if cr, ok := claims.(ClaimRenewer); ok && (cl.State == ClaimAcquired || cl.State == ClaimOrphaned) {
		// The claim is this delivery's now: keep it live until Record
		// or Release ended it, however long the Target or the store takes:
		// after a post, record stops it.
		r := c.renewClaim(cr, id, owner, claimed)
		renewal = r
		defer func() {
			if post.ok {
				post.renewal = r
			} else {
				r.stop()
			}
		}()
	}
	switch cl.State {
	case ClaimHeld:
		// Another process is delivering it now; its ack goes to the
		// sender's earlier copy, and this one may be tried again.
		return AckRejected, &Error{Code: CodeChannelBusy, Message: "message is being delivered by another owner", Retryable: true}, posted{}
	case ClaimOrphaned:
		if !sameContent(cl.Fingerprint, m) {
			// An attempt with other content may have been posted (S6).
			return AckRejected, Errorf(CodeMessageIDConflict, "message_id %q was being delivered with other content", id), posted{}
		}
		// An orphan whose post never began (a ClaimStarter knows) is
		// posted: nothing of it can be on screen. A store that is no
		// ClaimStarter (a wrapper that hides Begin) is not believed.
		if _, starts := claims.(ClaimStarter); !cl.Unposted || !starts {
			if status, rej, done := c.orphan(id, fp, IdempotencyKeyOf(c.id, id)); done {
				return status, rej, posted{}
			}
		}
	}
	if renewal != nil && !renewal.coversPost() {
		// The Claim (or a WasPosted check) took so long that the lease may
		// lapse during the post: do not start it (issue 38). Nothing was
		// posted; the resend claims again.
		c.release(claims, id, owner)
		return AckRejected, &Error{Code: CodeTargetDeliveryFailed, Message: "the claim may lapse before the post ends; not posted", Retryable: true}, posted{}
	}
	if starter, ok := claims.(ClaimStarter); ok {
		// The store learns that the post begins before it does: a crash
		// before this leaves a claim whose resend is posted (Unposted),
		// one after it a claim whose outcome is unknown.
		sctx := c.storeCtx(claims)
		err := starter.Begin(c.call(sctx), c.id, id, owner)
		sctx.Release()
		if err != nil {
			c.log.Warn("claim's post not recorded as begun; not posting", "message_id", id, "err", err)
			c.release(claims, id, owner)
			return AckRejected, &Error{Code: CodeTargetDeliveryFailed, Message: "idempotency store unavailable", Retryable: true}, posted{}
		}
	}
	// No allocation (it lives in the delivery), where
	// WithTimeout(WithIdempotencyKey(...)) costs seven and a SHA-256: the
	// key and the timer are made only if the Target asks (internal/storectx).
	tctx.InitTarget(c.o.Clock, c.ctx, c.o.TargetTimeout, storectx.Key{Name: idempotencyKeyCtx{}, Of: IdempotencyKeyOf, A: c.id, B: id})
	_, untimed := c.o.Observer.(noObserver) // took only goes to the Observer
	var began time.Time
	if !untimed {
		began = c.o.Clock.Now()
	}
	err = c.target.PostMessage(tctx, c.id, m)
	var took time.Duration
	if !untimed {
		took = c.o.Clock.Now().Sub(began)
	}
	tctx.Release()
	if err != nil {
		outcome := outcomeOf(err)
		code := CodeTargetDeliveryFailed
		var e *Error
		if errors.As(err, &e) && e.Code != "" {
			code = e.Code
		} else if outcome == outcomeRefused {
			code = CodeTargetRejected
		}
		c.observe(Event{Kind: EventTargetFailed, MessageID: id, Code: code, Duration: took})
		msg := truncate(err.Error(), maxAckMessageBytes)
		if outcome == outcomeUnknown {
			return c.unknown(id, msg, claims, owner, took)
		}
		c.release(claims, id, owner)
		rej := &Error{Code: code, Message: msg, Retryable: outcome == outcomeNotApplied}
		if c.ctx.Err() != nil {
			rej.Retryable = true // cancelled by Close: let the sender try again
		}
		return AckRejected, rej, posted{}
	}
	return "", nil, posted{ok: true, took: took}
}

// release drops the claim of a message whose post was not applied.
func (c *Channel) release(claims ClaimStore, id, owner string) {
	if claims == nil {
		return
	}
	sctx := c.storeCtx(claims)
	if err := claims.Release(c.call(sctx), c.id, id, owner); err != nil {
		// The claim stays and turns orphaned: a resend is then
		// refused as unknown, never posted twice.
		c.log.Warn("claim not released", "message_id", id, "err", err)
	}
	sctx.Release()
}

// unknown answers a post that failed with an unmarked error, which may
// have been applied (the error contract, errors.go): as after a crash
// between claim and Record (orphan). A port.IdempotentTarget's message is
// rejected retryable, its claim released: the resend posts it again,
// harmlessly. Otherwise the claim stays, so that no resend posts it
// blindly: a port.PostCheckTarget is asked now (posted: accepted; not posted:
// released, rejected retryable; no answer: rejected retryable, and the
// resend, finding the claim orphaned, asks again); any other message is
// rejected delivery_outcome_unknown, retryable=false. A post cut off by
// Close is rejected retryable, its claim kept: the resend decides.
func (c *Channel) unknown(id, msg string, claims ClaimStore, owner string, took time.Duration) (AckStatus, *Error, posted) {
	retry := &Error{Code: CodeTargetDeliveryFailed, Message: msg, Retryable: true}
	if it, ok := c.target.(port.IdempotentTarget); ok && it.PostsIdempotently() {
		c.release(claims, id, owner)
		return AckRejected, retry, posted{}
	}
	if c.ctx.Err() != nil {
		return AckRejected, retry, posted{}
	}
	if pc, ok := c.target.(port.PostCheckTarget); ok {
		tctx := c.targetCtx()
		was, err := pc.WasPosted(tctx, c.id, IdempotencyKeyOf(c.id, id))
		tctx.Release()
		switch {
		case err == nil && was:
			return "", nil, posted{ok: true, took: took}
		case err == nil:
			c.release(claims, id, owner)
			return AckRejected, retry, posted{}
		case !errors.Is(err, errors.ErrUnsupported):
			return AckRejected, retry, posted{}
		}
	}
	return AckRejected, &Error{Code: CodeDeliveryOutcomeUnknown, Message: truncate("the post failed and may have been shown; it is not made again: "+msg, maxAckMessageBytes)}, posted{}
}

// orphan decides what to do with a message whose earlier attempt never
// completed: post it again (done false) when the Target is idempotent or
// confirms it was not posted, answer duplicate when it confirms it was,
// and otherwise reject it, retryable=false, with delivery_outcome_unknown:
// the sender reports a failure it can see, and nothing is shown twice.
// The claim is kept (it is the caller's now) so a later copy finds the
// orphan again.
func (c *Channel) orphan(id string, fp Fingerprint, key string) (AckStatus, *Error, bool) {
	if it, ok := c.target.(port.IdempotentTarget); ok && it.PostsIdempotently() {
		return "", nil, false
	}
	if pc, ok := c.target.(port.PostCheckTarget); ok {
		tctx := c.targetCtx()
		posted, err := pc.WasPosted(tctx, c.id, key)
		tctx.Release()
		switch {
		case err == nil && posted:
			status, rej := c.complete(id, fp, EventDuplicate, AckDuplicate, 0)
			return status, rej, true
		case err == nil:
			return "", nil, false
		case !errors.Is(err, errors.ErrUnsupported):
			// The check itself failed: the outcome may be known later.
			return AckRejected, &Error{Code: CodeTargetDeliveryFailed, Message: truncate("checking an interrupted delivery: "+err.Error(), maxAckMessageBytes), Retryable: true}, true
		}
	}
	c.log.Warn("an interrupted delivery may or may not have been posted; not posting it again", "message_id", id)
	return AckRejected, &Error{Code: CodeDeliveryOutcomeUnknown, Message: "an earlier delivery of this message was interrupted; it may have been shown once"}, true
}

// complete records the message as completed and answers status; took is
// how long the Target call took (0 when none ran).
func (c *Channel) complete(id string, fp Fingerprint, kind EventKind, status AckStatus, took time.Duration) (AckStatus, *Error) {
	sctx := c.storeCtx(c.o.Completed)
	defer sctx.Release()
	err := c.o.Completed.Record(c.call(sctx), c.id, id, fp)
	if _, renews := c.o.Completed.(ClaimRenewer); renews && err != nil {
		err = c.retryRecord(id, fp, err)
	}
	if err != nil {
		// The side effect happened; a rejection would make the sender
		// post it again. Accept, and say loudly that dedup is weakened
		// (with a ClaimStore the claim stays: a resend is refused as
		// unknown instead).
		c.log.Error("completed record not stored; a resend of this message may be posted again", "message_id", id, "err", err)
	}
	c.observe(Event{Kind: kind, MessageID: id, Duration: took})
	return status, nil
}

// answer sends the ack of one received copy of a message.
func (c *Channel) answer(p *Packet, id string, status AckStatus, rej *Error) {
	c.answerInto(new(Packet), nil, p, id, status, rej)
}

// answerInto is answer building the ack in ack, its payload in buf.
func (c *Channel) answerInto(ack *Packet, buf []byte, p *Packet, id string, status AckStatus, rej *Error) {
	if status == AckRejected && rej != nil {
		rej = ackable(rej)
		c.observe(Event{Kind: EventRejected, MessageID: id, Code: rej.Code, Status: status})
	}
	if err := newAckInto(ack, buf, p, id, status, rej); err != nil {
		c.log.Error("ack not built", "message_id", id, "err", err)
		return
	}
	c.reply(ack)
}

func (c *Channel) reject(p *Packet, id string, e *Error) error {
	c.answer(p, id, AckRejected, e)
	return e
}

// rejectInvalid answers an invalid chat.message: a rejected ack when the
// message_id can be read (E3: a business failure uses the ack), an error
// packet otherwise.
func (c *Channel) rejectInvalid(p *Packet, e *Error) {
	var head struct {
		MessageID string `json:"message_id"`
	}
	if p.DecodePayload(&head) == nil && checkID("message_id", head.MessageID) == nil {
		c.answer(p, head.MessageID, AckRejected, e)
		return
	}
	c.observe(Event{Kind: EventRejected, Code: e.Code, PacketType: p.Type})
	c.reply(NewErrorPacket(p, e))
}
