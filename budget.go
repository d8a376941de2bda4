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
// A pooled budget (NewPooledBudget) sets keep bytes aside for the floors
// of its shares (Share): a share may always take up to its floor, and all
// other use — a share's beyond its floor — takes at most limit-keep, so
// no set of shares can take the whole budget while another is under its
// floor.
type Budget struct {
	limit  int64
	keep   int64 // bytes of limit set aside for the floors of shares
	floor  int64 // of a share: what its parent guarantees it
	parent *Budget
	used   atomic.Int64
	above  atomic.Int64 // use not covered by a share's floor
	floors atomic.Int64 // floors of the shares not retired
}

// NewBudget returns a budget of limit bytes under parent (nil for a root).
// A limit ≤ 0 is no limit of its own: only the ancestors bound it, which
// still counts its use.
func NewBudget(limit int64, parent *Budget) *Budget {
	return &Budget{limit: limit, parent: parent}
}

// NewPooledBudget returns a budget of limit bytes under parent that keeps
// keep bytes for the floors of its shares (Share); every other use, a
// share's beyond its floor included, takes at most limit-keep.
func NewPooledBudget(limit, keep int64, parent *Budget) *Budget {
	return &Budget{limit: limit, keep: min(max(keep, 0), max(limit, 0)), parent: parent}
}

// Share returns a budget of limit bytes under b that is guaranteed floor
// bytes of b whatever b's other budgets hold, while the floors of b's
// shares fit in b's keep; past that it is guaranteed nothing. Retire
// returns the floor once the share is no longer used.
func (b *Budget) Share(limit, floor int64) *Budget {
	if floor <= 0 || b.floors.Add(floor) > b.keep {
		if floor > 0 {
			b.floors.Add(-floor)
		}
		floor = 0
	}
	return &Budget{limit: limit, floor: floor, parent: b}
}

// Retire gives a share's floor back to its parent, for a later Share.
// Call it once, when the share is dropped; what the share still holds is
// released as usual.
func (b *Budget) Retire() {
	if b != nil && b.floor > 0 && b.parent != nil {
		b.parent.floors.Add(-b.floor)
	}
}

// reserve takes n bytes for b's own use (a Channel's) from b and its
// ancestors, or nothing and false when that would pass a limit.
func (b *Budget) reserve(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.above.Add(n) // own use is covered by no share's floor
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
// caller) grew. Each change of a share's use moves its parent's above by
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
