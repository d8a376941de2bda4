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
//
// A pooled budget (NewPooledBudget) guarantees each of its children a
// floor: it sets the floors of its children aside, and all other use — a
// child's beyond its floor — takes at most the rest, so no set of
// children can take the whole budget while another is under its floor.
type Budget struct {
	limit      int64
	keep       int64 // bytes of limit set aside for the children's floors
	childFloor int64 // what a pooled budget guarantees each child
	floor      int64 // what the parent guarantees this budget
	parent     *Budget
	used       atomic.Int64
	above      atomic.Int64 // use not covered by a child's floor
}

// NewBudget returns a budget of limit bytes under parent (nil for a root).
// A limit ≤ 0 is no limit of its own: only the ancestors bound it, which
// still counts its use. Under a pooled parent it is guaranteed the
// parent's floor.
func NewBudget(limit int64, parent *Budget) *Budget {
	b := &Budget{limit: limit, parent: parent}
	if parent != nil {
		b.floor = parent.childFloor
	}
	return b
}

// NewPooledBudget returns a budget of limit bytes under parent that
// guarantees each of its children (NewBudget with it as parent) floor
// bytes, whatever the others hold, while at most children of them hold
// bytes at once: it sets children×floor bytes aside, and what children
// hold beyond their floors takes at most the rest of limit.
func NewPooledBudget(limit, floor int64, children int, parent *Budget) *Budget {
	floor = max(floor, 0)
	keep := min(floor*int64(max(children, 0)), max(limit, 0))
	return &Budget{limit: limit, keep: keep, childFloor: floor, parent: parent}
}

// reserve takes n bytes for b's own use (a Channel's) from b and its
// ancestors, or nothing and false when that would pass a limit.
func (b *Budget) reserve(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.above.Add(n) // own use is covered by no child's floor
	if !b.take(n, true) {
		b.above.Add(-n)
		return false
	}
	return true
}

// release returns n bytes taken by reserve to the budget and its ancestors.
func (b *Budget) release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.above.Add(-n)
	for ; b != nil; b = b.parent {
		w := b.used.Add(-n)
		b.parent.shift(b.floor, w+n, w)
	}
}

// take adds n to b's use and its ancestors', or nothing and false when
// that would pass a limit; grew says whether b.above (moved by the
// caller) grew. Each change of a child's use moves its parent's above by
// the change of the part beyond its floor, rollbacks included, so above
// stays exact under concurrent calls.
func (b *Budget) take(n int64, grew bool) bool {
	v := b.used.Add(n)
	d := b.parent.shift(b.floor, v-n, v)
	if b.limit > 0 && (v > b.limit || grew && b.above.Load() > b.limit-b.keep) || b.parent != nil && !b.parent.take(n, d > 0) {
		w := b.used.Add(-n)
		b.parent.shift(b.floor, w+n, w)
		return false
	}
	return true
}

// shift moves b.above by the change, from use from to use to, of a
// child's use beyond its floor, and returns that change.
func (b *Budget) shift(floor, from, to int64) int64 {
	if b == nil {
		return 0
	}
	d := max(to-floor, 0) - max(from-floor, 0)
	if d != 0 {
		b.above.Add(d)
	}
	return d
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
