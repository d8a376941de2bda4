package imv2

import "sync/atomic"

// Budget bounds the bytes a peer can make the SDK hold: the assembled text
// of open delta streams and the finals (and their resends) queued for a
// Target call. Budgets form a tree: a Reserve succeeds only when it fits in
// the budget and in every ancestor, so a Server's budget bounds all of its
// connector_ids together while each connector_id's budget keeps one peer
// from taking the whole of it.
//
// A Channel gets its budget through Options.Budget. Over budget, a delta
// for a new stream, or one that needs more room, is rejected with
// delta_limit_exceeded and a final with channel_busy (retryable): the
// sender tries again later, and memory never grows past the limit.
//
// Reserve and Release are a few atomic operations per level, with no lock;
// a Channel reserves delta text when its buffer grows (amortised, not per
// delta) and a final once when it is queued. A nil *Budget is unlimited.
type Budget struct {
	limit  int64
	parent *Budget
	used   atomic.Int64
}

// NewBudget returns a budget of limit bytes under parent (nil for a root).
// A limit ≤ 0 is no limit of its own: only the ancestors bound it, which
// still counts its use.
func NewBudget(limit int64, parent *Budget) *Budget {
	return &Budget{limit: limit, parent: parent}
}

// Reserve takes n bytes from the budget and its ancestors, or nothing and
// false when that would pass a limit.
func (b *Budget) reserve(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if v := b.used.Add(n); b.limit > 0 && v > b.limit {
		b.used.Add(-n)
		return false
	}
	if !b.parent.reserve(n) {
		b.used.Add(-n)
		return false
	}
	return true
}

// Release returns n bytes taken by Reserve to the budget and its ancestors.
func (b *Budget) release(n int64) {
	for ; b != nil && n > 0; b = b.parent {
		b.used.Add(-n)
	}
}

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// reserveLocked takes n bytes from the channel's budget for state a peer
// made it hold; false when the budget has no room or the channel is
// closed. c.mu must be held.
func (c *Channel) reserveLocked(n int64) bool {
	if c == nil {
		return true // a deltaStream used on its own (tests, fuzzing)
	}
	if c.closed || !c.o.Budget.reserve(n) {
		return false
	}
	c.held += n
	return true
}

// releaseLocked returns n bytes taken by reserveLocked. After Close it does
// nothing: Close returned all the channel held at once. c.mu must be held.
func (c *Channel) releaseLocked(n int64) {
	if c.closed {
		return
	}
	n = min(n, c.held)
	c.held -= n
	c.o.Budget.release(n)
}

// releaseAllLocked returns everything the channel holds, on Close: its
// streams and queued messages are unreachable from then on. c.mu must be
// held.
func (c *Channel) releaseAllLocked() {
	c.o.Budget.release(c.held)
	c.held = 0
}
