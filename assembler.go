package imv2

import (
	"context"
	"errors"
	"time"
	"unsafe"

	"github.com/xagentkit/imv2/internal/port"
)

// deltaStream is the assembled text of one assistant message's deltas (D2,
// D3). Text lives in an append-only buffer, so appending is amortised O(1)
// and text() shares the bytes: handing the text so far to a port.StreamingTarget
// copies nothing, and a 10,000th delta costs what the 100th did. The
// buffer grows under the channel's Budget: what it holds is its capacity,
// reserved before it is allocated (held), not its length.
type deltaStream struct {
	buf     []byte // bytes below len(buf) never change, so text() may share them
	ends    []int  // ends[i] is where sequence i+1 ends in buf
	held    int64  // Budget bytes reserved for this stream, guarded by Channel.mu
	touched time.Time
	started time.Time // its first delta: the stream ends DeltaMaxAge after it

	// Draft lane (port.StreamingTarget only): the newest text not yet shown,
	// and whether a goroutine is showing drafts. Guarded by Channel.mu.
	draft    string
	hasDraft bool
	drafting bool
	idle     chan struct{} // closed when drafting stops
	shown    bool          // a draft was displayed (clears activity, C6)
	noDrafts bool          // its first draft was skipped or failed: it is shown by its final alone
	final    bool          // the final arrived: no more drafts (D10)
	place    *place        // where it stands in the channel's order (order.go)
	// checking: the completed store is being asked, off the reader,
	// whether the message is complete (D11, checkCompleted); no draft is
	// shown until it answered.
	checking bool
}

// apply adds delta seq with text. It reports whether the text grew, or an
// *Error: a gap (D4), a conflicting retransmission (D3), the byte bound
// (D9) or, when the buffer must grow, a Budget with no room (b nil: none).
// A retransmission with the same text changes nothing (D3).
func (s *deltaStream) apply(seq int64, text string, maxBytes int, b *Channel) (bool, *Error) {
	n := int64(len(s.ends))
	switch {
	case seq <= n:
		start := 0
		if seq > 1 {
			start = s.ends[seq-2]
		}
		if string(s.buf[start:s.ends[seq-1]]) == text {
			return false, nil
		}
		return false, Errorf(CodeDeltaSequenceConflict, "sequence %d was received with other text (D3)", seq)
	case seq > n+1:
		return false, Errorf(CodeDeltaSequenceGap, "sequence %d follows %d (D4)", seq, n)
	}
	// Each delta costs its text and one index entry; both count, so a
	// flood of empty or one-byte deltas is bounded too (D9).
	if s.size()+len(text)+deltaOverhead > maxBytes {
		return false, Errorf(CodeDeltaLimitExceeded, "assembled text would pass %d bytes (D9)", maxBytes)
	}
	bufCap, endsCap := cap(s.buf), cap(s.ends)
	if need := len(s.buf) + len(text); need > bufCap {
		bufCap = growCap(bufCap, need, maxBytes)
	}
	if len(s.ends) == endsCap {
		endsCap = growCap(endsCap, len(s.ends)+1, maxBytes/deltaOverhead)
	}
	if extra := int64(bufCap-cap(s.buf)) + deltaOverhead*int64(endsCap-cap(s.ends)); extra > 0 {
		if !b.reserveLocked(extra) {
			return false, Errorf(CodeDeltaLimitExceeded, "the memory budget for delta text is spent; try later (D9)")
		}
		s.held += extra
	}
	if bufCap > cap(s.buf) {
		nb := make([]byte, len(s.buf), bufCap)
		copy(nb, s.buf)
		s.buf = nb
	}
	if endsCap > cap(s.ends) {
		ne := make([]int, len(s.ends), endsCap)
		copy(ne, s.ends)
		s.ends = ne
	}
	s.buf = append(s.buf, text...)
	s.ends = append(s.ends, len(s.buf))
	return text != "", nil
}

// growCap is the capacity a buffer of capacity old grows to for need
// elements: doubling (amortised O(1) appends), at least 64, at most limit
// unless need itself is larger.
func growCap(old, need, limit int) int {
	c := max(2*old, need, 64)
	if c > limit {
		c = max(limit, need)
	}
	return c
}

// text returns the assembled text, sharing the buffer's bytes.
func (s *deltaStream) text() string { return unsafe.String(unsafe.SliceData(s.buf), len(s.buf)) }

// deltaOverhead is what one delta costs beyond its text: its index entry.
const deltaOverhead = 8

// streamOverhead is what an open stream costs the Budget beyond its
// buffers: the deltaStream, its map entry and its message_id key.
const streamOverhead = 512

// size is the bytes the stream holds, as counted against MaxDeltaBytes.
func (s *deltaStream) size() int { return len(s.buf) + deltaOverhead*len(s.ends) }

// waitDrafts blocks until no draft call is running. Called by the final's
// delivery after it set final, so no new draft starts.
func (s *deltaStream) waitDrafts() {
	if s.idle != nil {
		<-s.idle
	}
}

// receiveDelta handles a chat.message.delta on a Connector channel (D1–D12).
func (c *Channel) receiveDelta(ctx context.Context, p *Packet) error {
	d, err := DecodeChatMessageDelta(p)
	if err != nil {
		return c.rejectDelta(p, "", AsError(err, CodeInvalidPacket))
	}
	id := d.MessageID

	c.mu.Lock()
	s := c.deltas[id]
	if s == nil {
		if c.inflight[id] != nil { // its final is being delivered (D11)
			c.mu.Unlock()
			c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
			return nil
		}
		// A new stream: is the message already complete (D11)? An
		// in-memory store answers here; a store that does I/O is asked
		// off this goroutine, the connection's reader (checkCompleted).
		inline := inlineStore(c.o.Completed)
		if inline {
			c.mu.Unlock()
			if _, done, err := c.o.Completed.Lookup(ctx, c.id, id); err == nil && done {
				c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
				return nil
			}
			c.mu.Lock()
		}
		if c.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		if s = c.deltas[id]; s == nil {
			if c.inflight[id] != nil {
				c.mu.Unlock()
				c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
				return nil
			}
			var rej *Error
			switch {
			case len(c.deltas) >= c.o.MaxOpenDeltas:
				rej = Errorf(CodeDeltaLimitExceeded, "%d delta streams open on this channel (D9)", len(c.deltas))
			case d.Sequence != 1: // never start a stream mid-way (D4)
				rej = Errorf(CodeDeltaSequenceGap, "sequence %d starts a stream (D4)", d.Sequence)
			case !c.reserveLocked(streamOverhead):
				rej = Errorf(CodeDeltaLimitExceeded, "the memory budget for delta text is spent; try later (D9)")
			}
			if rej != nil {
				if inline || !c.refuseUnlessCompletedLocked(p, id, rej) {
					c.mu.Unlock()
					return c.rejectDelta(p, id, rej)
				}
				c.mu.Unlock()
				return nil
			}
			now := c.o.Clock.Now()
			// The place is taken here, on the reader, in the order
			// streams begin (order.go).
			s = &deltaStream{held: streamOverhead, touched: now, started: now, checking: !inline, place: c.newPlaceLocked(id)}
			if c.deltas == nil {
				c.deltas = map[string]*deltaStream{}
			}
			c.deltas[id] = s
			c.armSweepLocked()
			if s.checking {
				c.spawnLocked(func() { c.checkCompleted(id, s) })
			}
		}
	}
	grew, rej := s.apply(d.Sequence, d.Text, c.o.MaxDeltaBytes, c)
	if rej != nil {
		c.mu.Unlock()
		return c.rejectDelta(p, id, rej)
	}
	if !grew {
		// A repeat or an empty delta keeps nothing alive: only text that
		// extends the stream refreshes its idle timer (D9).
		c.mu.Unlock()
		c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
		return nil
	}
	s.touched = c.o.Clock.Now()
	if _, ok := c.target.(port.StreamingTarget); ok { // D8: stream to the target; else buffer until the final
		s.draft, s.hasDraft = s.text(), true
		c.startDraftsLocked(id, s)
	}
	c.mu.Unlock()
	return nil
}

// showDrafts hands the newest text to the port.StreamingTarget until none is
// left. Drafts that arrive during a slow call are coalesced into one. The
// first draft is the message's place in the chat: it is shown only once
// every message that started before it is in the chat or ended (order.go),
// waiting at most TargetTimeout, and not at all while an earlier message
// is unresolved (rejected retryable): then the message shows no draft and
// is shown by its final alone, which keeps its place (M14). A first draft
// the Target refused settles nothing: the message is shown by its final.
func (c *Channel) showDrafts(id string, s *deltaStream) {
	var until time.Time
	for {
		c.mu.Lock()
		if !s.hasDraft || s.final || s.noDrafts || c.closed {
			s.drafting = false
			close(s.idle)
			c.mu.Unlock()
			return
		}
		if !s.shown && (c.heldLocked() || !c.firstLocked(s.place)) {
			if until.IsZero() {
				until = c.o.Clock.Now().Add(c.o.TargetTimeout)
			}
			if c.heldLocked() || !c.waitSignal(until) {
				s.noDrafts = true
			}
			c.mu.Unlock()
			continue
		}
		text := s.draft
		s.draft, s.hasDraft = "", false
		first := !s.shown
		s.shown = true
		c.mu.Unlock()

		if first {
			c.clearActivity() // the first displayed delta clears the status (C6)
		}
		tctx := c.targetCtx()
		err := c.target.(port.StreamingTarget).UpdateDraft(tctx, c.id, id, text)
		tctx.Release()
		switch {
		case err != nil && first && errors.Is(err, errors.ErrUnsupported):
			// The Target shows no drafts (a buffering display): the
			// message is shown by its final.
		case err != nil:
			c.log.Warn("draft not shown; the final will carry the whole text", "message_id", id, "err", err)
		}
		if first {
			c.mu.Lock()
			if err == nil {
				c.settlePlaceLocked(s.place)
			} else {
				s.noDrafts = true
			}
			c.mu.Unlock()
		}
	}
}

// rejectDelta answers a delta with an error packet (D12, X4).
func (c *Channel) rejectDelta(p *Packet, id string, e *Error) error {
	c.observe(Event{Kind: EventDeltaRejected, MessageID: id, Code: e.Code})
	c.reply(NewErrorPacket(p, e))
	return e
}

// armSweepLocked starts the idle sweep if it is not running. No timer runs
// while a channel has no open stream, so idle channels cost no timers.
func (c *Channel) armSweepLocked() {
	if c.sweep != nil || c.closed {
		return
	}
	c.sweep = c.afterLocked(c.o.DeltaSweep, c.sweepDeltas)
}

// sweepDeltas drops streams idle for longer than DeltaIdleTTL (D9) or
// older than DeltaMaxAge.
func (c *Channel) sweepDeltas() {
	c.mu.Lock()
	c.sweep = nil
	now := c.o.Clock.Now()
	expired := c.dropDeltasLocked(func(s *deltaStream) bool {
		return now.Sub(s.touched) >= c.o.DeltaIdleTTL || now.Sub(s.started) >= c.o.DeltaMaxAge
	})
	if len(c.deltas) > 0 {
		c.armSweepLocked()
	}
	c.mu.Unlock()
	for _, id := range expired {
		c.observe(Event{Kind: EventDeltaExpired, MessageID: id})
	}
}

// dropDeltasLocked drops the streams drop picks, returning their budget,
// and returns their message IDs. A final that follows is handled as a
// final without deltas. c.mu is held.
func (c *Channel) dropDeltasLocked(drop func(*deltaStream) bool) []string {
	var ids []string
	for id, s := range c.deltas {
		if drop(s) {
			delete(c.deltas, id)
			// A running UpdateDraft may still read the buffer (unsafe.String): at most one draft per stream over budget, for up to TargetTimeout.
			c.releaseLocked(s.held)
			s.final = true // stops its draft lane
			c.settlePlaceLocked(s.place)
			ids = append(ids, id)
		}
	}
	return ids
}
