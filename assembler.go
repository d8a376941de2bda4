package imv2

import (
	"context"
	"strings"
	"time"
)

// deltaStream is the assembled text of one assistant message's deltas (D2,
// D3). Text lives in a strings.Builder, so appending is amortised O(1) and
// String() shares the bytes: handing the text so far to a StreamingTarget
// copies nothing, and a 10,000th delta costs what the 100th did.
type deltaStream struct {
	text    strings.Builder
	ends    []int // ends[i] is where sequence i+1 ends in text
	touched time.Time

	// Draft lane (StreamingTarget only): the newest text not yet shown,
	// and whether a goroutine is showing drafts. Guarded by Channel.mu.
	draft    string
	hasDraft bool
	drafting bool
	idle     chan struct{} // closed when drafting stops
	shown    bool          // a draft was displayed (clears activity, C6)
	final    bool          // the final arrived: no more drafts (D10)
}

// apply adds delta seq with text. It reports whether the text grew, or an
// *Error: a gap (D4), a conflicting retransmission (D3) or the byte bound (D9).
// A retransmission with the same text changes nothing (D3).
func (s *deltaStream) apply(seq int64, text string, maxBytes int) (bool, *Error) {
	n := int64(len(s.ends))
	switch {
	case seq <= n:
		start := 0
		if seq > 1 {
			start = s.ends[seq-2]
		}
		if s.text.String()[start:s.ends[seq-1]] == text {
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
	s.text.WriteString(text)
	s.ends = append(s.ends, s.text.Len())
	return text != "", nil
}

// deltaOverhead is what one delta costs beyond its text: its index entry.
const deltaOverhead = 8

// size is the bytes the stream holds, as counted against MaxDeltaBytes.
func (s *deltaStream) size() int { return s.text.Len() + deltaOverhead*len(s.ends) }

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
		c.mu.Unlock()
		// A new stream: is the message already complete (D11)? The store
		// is asked outside the lock, since it may do I/O.
		if _, done, err := c.o.Completed.Lookup(ctx, c.id, id); err == nil && done {
			c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
			return nil
		}
		c.mu.Lock()
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
			if len(c.deltas) >= c.o.MaxOpenDeltas {
				c.mu.Unlock()
				return c.rejectDelta(p, id, Errorf(CodeDeltaLimitExceeded, "%d delta streams open on this channel (D9)", len(c.deltas)))
			}
			if d.Sequence != 1 { // never start a stream mid-way (D4)
				c.mu.Unlock()
				return c.rejectDelta(p, id, Errorf(CodeDeltaSequenceGap, "sequence %d starts a stream (D4)", d.Sequence))
			}
			s = &deltaStream{}
			c.deltas[id] = s
			c.armSweepLocked()
		}
	}
	grew, rej := s.apply(d.Sequence, d.Text, c.o.MaxDeltaBytes)
	if rej != nil {
		c.mu.Unlock()
		return c.rejectDelta(p, id, rej)
	}
	s.touched = c.o.Clock.Now()
	if !grew {
		c.mu.Unlock()
		c.observe(Event{Kind: EventDeltaIgnored, MessageID: id})
		return nil
	}
	if c.streaming != nil { // D8: stream to the target; else buffer until the final
		s.draft, s.hasDraft = s.text.String(), true
		if !s.drafting {
			s.drafting = true
			s.idle = make(chan struct{})
			c.spawnLocked(func() { c.showDrafts(id, s) })
		}
	}
	c.mu.Unlock()
	return nil
}

// showDrafts hands the newest text to the StreamingTarget until none is
// left. Drafts that arrive during a slow call are coalesced into one.
func (c *Channel) showDrafts(id string, s *deltaStream) {
	for {
		c.mu.Lock()
		if !s.hasDraft || s.final || c.closed {
			s.drafting = false
			close(s.idle)
			c.mu.Unlock()
			return
		}
		text := s.draft
		s.draft, s.hasDraft = "", false
		first := !s.shown
		s.shown = true
		c.mu.Unlock()

		if first {
			c.clearActivity() // the first displayed delta clears the status (C6)
		}
		tctx, cancel := context.WithTimeout(c.ctx, c.o.TargetTimeout)
		if err := c.streaming.UpdateDraft(tctx, c.id, id, text); err != nil {
			c.log.Warn("draft not shown; the final will carry the whole text", "message_id", id, "err", err)
		}
		cancel()
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

// sweepDeltas drops streams idle for longer than DeltaIdleTTL (D9).
func (c *Channel) sweepDeltas() {
	c.mu.Lock()
	c.sweep = nil
	now := c.o.Clock.Now()
	var expired []string
	for id, s := range c.deltas {
		if now.Sub(s.touched) >= c.o.DeltaIdleTTL {
			delete(c.deltas, id)
			s.final = true // stops its draft lane
			expired = append(expired, id)
		}
	}
	if len(c.deltas) > 0 {
		c.armSweepLocked()
	}
	c.mu.Unlock()
	for _, id := range expired {
		c.observe(Event{Kind: EventDeltaExpired, MessageID: id})
	}
}
