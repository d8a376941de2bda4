package connector

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
)

// The rate half of Pace: calls spaced between their departures, a line
// per conversation and one for the platform, and Turn for a method that
// calls late or several times. pace.go holds the other half, the retries.

// lane is the spacing of calls under one rate: a conversation's or the
// platform's (GCRA: tat is when the bucket is full again, slack what a
// burst may run ahead of it).
type lane struct {
	gap, slack time.Duration // 1/rate and (burst-1)/rate; gap 0: no limit
	tat, prev  time.Time     // prev: tat before the last departure, to move it
	last       uint64        // id of the last departure
	queue      []*turn       // calls waiting, first in line first
	moved      chan struct{} // a conversation's: closed when the head of queue leaves
}

func newLane(rate float64, burst int) lane {
	if rate == 0 {
		return lane{}
	}
	// At least a call a day (and a burst's slack at most a year): larger
	// gaps would overflow the times they are added to.
	gap := time.Duration(min(float64(time.Second)/rate, float64(24*time.Hour)))
	slack := time.Duration(min(float64(burst-1)*float64(gap), float64(365*24*time.Hour)))
	return lane{gap: gap, slack: slack}
}

// delay is how long a new departure waits at now.
func (l *lane) delay(now time.Time) time.Duration {
	if l.gap == 0 {
		return 0
	}
	return l.tat.Add(-l.slack).Sub(now)
}

func (l *lane) depart(now time.Time, id uint64) {
	l.prev, l.last = l.tat, id
	l.tat = later(l.tat, now).Add(l.gap)
}

// move puts the lane's last departure at now instead.
func (l *lane) move(now time.Time) {
	if l.gap != 0 {
		l.tat = later(l.prev, now).Add(l.gap)
	}
}

// leave takes t out of the queue, waking the next in line when t led it.
func (l *lane) leave(t *turn) {
	i := slices.Index(l.queue, t)
	if i < 0 {
		return
	}
	l.queue = slices.Delete(l.queue, i, i+1)
	if i == 0 && l.moved != nil {
		close(l.moved)
		l.moved = nil
	}
}

// leaveAll takes t out of the platform's line, telling the next in line
// when t led it: only the line's head watches the clock, so a departure
// wakes one waiting call, not all of them.
func (pc *pacer) leaveAll(t *turn) {
	q := &pc.all.queue
	i := slices.Index(*q, t)
	if i < 0 {
		return
	}
	*q = slices.Delete(*q, i, i+1)
	if i == 0 && len(*q) > 0 {
		select {
		case (*q)[0].next <- struct{}{}:
		default: // told already
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// turn is one call's pacing: the kit let it go (departed, with id); the
// platform's method may move that departure (its first Turn) and take
// further ones (each later Turn).
type turn struct {
	pc     *pacer
	key    string
	conv   *lane
	mu     sync.Mutex // a method's Turns, one at a time
	id     uint64
	called bool          // the method called Turn: the next is a departure of its own
	next   chan struct{} // told when t heads the platform's line (one slot)
}

type turnKey struct{}

// Turn waits until the platform may make a call to the conversation of
// ctx: ctx is the one the kit passed to a Platform method (or derived
// from it); with any other ctx Turn returns at once. A method that makes
// its platform call at once needs no Turn: the kit lets it go at its turn
// under Pace. A method that does something first (writes to a store,
// uploads) or makes several platform calls calls Turn just before each:
// its first Turn moves the call's departure to then, so the next call is
// spaced from it, and each later Turn waits a turn of its own under
// PerConversation and PerPlatform (and a running Retry-After). The error
// is imv2.NotPosted: the wait did not fit ctx's deadline, or ctx ended.
func Turn(ctx context.Context) error {
	t, ok := ctx.Value(turnKey{}).(*turn)
	if !ok {
		return ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.called
	t.called = true
	if err := t.pc.take(ctx, t, first); err != nil {
		return imv2.NotPosted(err)
	}
	return nil
}

// conv is key's lane, made on first use.
func (pc *pacer) conv(key string) *lane {
	if c, ok := pc.convs.Get(key); ok {
		return c
	}
	l := newLane(pc.p.PerConversation, pc.p.ConversationBurst)
	c := &l
	if prev, ok, _ := pc.convs.PeekOrAdd(key, c); ok {
		return prev
	}
	return c
}

// take lets t depart once its conversation's earlier calls did, its
// Retry-After is over and both lanes allow it, re-checking after every
// wait (a timer may fire late). A call its conversation lets go waits
// for the platform's rate in one line with the other conversations'
// (first come, first served), where only the head watches the clock. With
// first, a lane whose last departure is still t's own (the kit's, before
// the method ran) has it moved to now rather than waiting a second turn
// there. It fails without waiting when the wait would overrun ctx's
// deadline.
func (pc *pacer) take(ctx context.Context, t *turn, first bool) error {
	l := t.conv
	pc.mu.Lock()
	ownConv := first && l.last == t.id && t.id != 0
	ownAll := first && pc.all.last == t.id && t.id != 0
	if !ownConv {
		// Behind the calls in line: each leaves at least a gap after the
		// one before, so a wait that cannot fit fails now.
		ahead := time.Duration(len(l.queue)) * l.gap
		if d := max(l.delay(pc.clock.Now()), 0) + ahead; len(l.queue) > 0 && !pc.fits(ctx, d) {
			pc.mu.Unlock()
			return errBudget
		}
		l.queue = append(l.queue, t)
	}
	inAll := false // t is in the platform's line
	quit := func() {
		l.leave(t)
		if inAll {
			pc.leaveAll(t)
		}
	}
	for {
		if !ownConv && l.queue[0] != t {
			if l.moved == nil {
				l.moved = make(chan struct{})
			}
			moved := l.moved
			pc.mu.Unlock()
			select {
			case <-moved:
			case <-ctx.Done():
				pc.mu.Lock()
				quit()
				pc.mu.Unlock()
				return ctx.Err()
			}
			pc.mu.Lock()
			continue
		}
		now := pc.clock.Now()
		d := pc.blockedLocked(t.key, now)
		if !ownConv {
			d = max(d, l.delay(now))
		}
		if d > 0 && inAll { // held by its conversation again (a Retry-After came)
			pc.leaveAll(t)
			inAll = false
		}
		if d <= 0 && !ownAll && pc.all.gap != 0 {
			if !inAll {
				ahead := time.Duration(len(pc.all.queue)) * pc.all.gap
				if len(pc.all.queue) > 0 && !pc.fits(ctx, max(pc.all.delay(now), 0)+ahead) {
					quit()
					pc.mu.Unlock()
					return errBudget
				}
				pc.all.queue = append(pc.all.queue, t)
				inAll = true
			}
			if pc.all.queue[0] != t {
				pc.mu.Unlock()
				select {
				case <-t.next:
				case <-ctx.Done():
					pc.mu.Lock()
					quit()
					pc.mu.Unlock()
					return ctx.Err()
				}
				pc.mu.Lock()
				continue
			}
			d = pc.all.delay(now)
		}
		if d <= 0 {
			pc.seq++
			for _, ln := range []*lane{l, &pc.all} {
				if own := (ln == l && ownConv) || (ln == &pc.all && ownAll); own {
					ln.move(now)
				} else {
					ln.depart(now, pc.seq)
				}
			}
			t.id = pc.seq
			quit()
			pc.mu.Unlock()
			return nil
		}
		if !pc.fits(ctx, d) {
			quit()
			pc.mu.Unlock()
			return errBudget
		}
		pc.mu.Unlock()
		err := sleep(ctx, pc.clock, d)
		pc.mu.Lock()
		if err != nil {
			quit()
			pc.mu.Unlock()
			return err
		}
	}
}
