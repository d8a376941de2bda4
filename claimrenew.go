package imv2

import (
	"sync"
	"time"

	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/storectx"
)

// claimRenewal renews one held claim every ClaimLease/3 while its delivery
// runs (ClaimRenewer). Renewals start ClaimLease/3 apart, counted from the
// start of the Claim and then of each renewal, whatever each took, and
// each is bounded by ClaimLease/3: the two that start within a lease of
// the last success must both fail for the claim to lapse, so it lapses
// only when its holder could not renew it for two thirds of a lease
// (less the store's answer time of the last success). Renewals go on
// while the channel closes: Close waits for the delivery, whose Record
// still runs, and the claim must outlive it.
type claimRenewal struct {
	c     *Channel
	cr    ClaimRenewer
	id    string
	owner string // the claim's (Channel.claimOwner)

	mu      sync.Mutex
	stopped bool
	held    time.Time // when the claim or its last successful renewal began: the lease runs at least ClaimLease from it
	next    time.Time // when the next renewal starts, on the Channel's clock
	timer   clock.Timer
	running sync.WaitGroup // the renewal in flight, which stop waits for
}

// renewClaim starts renewing c's claim on message id, held by owner and
// claimed at from.
func (c *Channel) renewClaim(cr ClaimRenewer, id, owner string, from time.Time) *claimRenewal {
	r := &claimRenewal{c: c, cr: cr, id: id, owner: owner, held: from, next: from.Add(c.o.ClaimLease / 3)}
	r.schedule()
	return r
}

func (r *claimRenewal) period() time.Duration { return r.c.o.ClaimLease / 3 }

// schedule arms the next renewal, unless the delivery ended.
func (r *claimRenewal) schedule() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.timer = r.c.o.Clock.AfterFunc(max(0, r.next.Sub(r.c.o.Clock.Now())), r.renew)
	}
}

// renew runs on the clock's goroutine.
func (r *claimRenewal) renew() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.running.Add(1)
	c := r.c
	begun := c.o.Clock.Now()
	r.next = begun.Add(r.period())
	r.mu.Unlock()
	defer r.running.Done()
	ctx := storectx.New(c.o.Clock, c.ctx, r.period())
	held, err := r.cr.RenewClaim(ctx, c.id, r.id, r.owner, c.o.ClaimLease)
	ctx.Release()
	switch {
	case err != nil:
		c.log.Warn("claim not renewed; trying again", "message_id", r.id, "err", err)
	case !held:
		// Taken over after a lapse, or already ended: another owner's
		// claim is not this delivery's to extend.
		c.log.Warn("claim lost while delivering; another owner may deliver this message too", "message_id", r.id)
		r.mu.Lock()
		r.held = time.Time{}
		r.mu.Unlock()
		return
	default:
		r.mu.Lock()
		if begun.After(r.held) && !r.held.IsZero() {
			r.held = begun
		}
		r.mu.Unlock()
	}
	r.schedule()
}

// coversPost reports whether the claim is surely live with room to spare
// for a post starting now: its lease, counted from the claim or its last
// successful renewal, has more than min(TargetTimeout, ClaimLease/3) left
// (with the default lease, a third: the renewals due meanwhile keep it
// live through the post). A slow Claim, a slow WasPosted or failing
// renewals make it false, and the post does not start on a lease that may
// lapse under it, when another owner could take it over and post too.
func (r *claimRenewal) coversPost() bool {
	r.mu.Lock()
	held := r.held
	r.mu.Unlock()
	lease := r.c.o.ClaimLease
	return !held.IsZero() && r.c.o.Clock.Now().Add(min(r.c.o.TargetTimeout, lease/3)).Sub(held) < lease
}

// stop ends the renewals, waiting for one in flight (at most ClaimLease/3):
// no goroutine of the delivery outlives it.
func (r *claimRenewal) stop() {
	r.mu.Lock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	r.running.Wait()
}

// recordRetryMin and recordRetryMax bound the backoff between the
// attempts of a Record that failed after the post.
const (
	recordRetryMin = 100 * time.Millisecond
	recordRetryMax = time.Second
)

// retryRecord tries a Record that failed (err) again, with backoff on the
// Channel's clock, until it succeeds or the channel closes, and returns
// the last error; each attempt gets its own store bound. Only with a
// ClaimRenewer: the claim stays live meanwhile (renewals do not wait for
// the Record), so however long the store takes, no other owner posts the
// message again while its live holder records it, and a success leaves
// nothing orphaned.
func (c *Channel) retryRecord(id string, fp Fingerprint, err error) error {
	for wait := recordRetryMin; err != nil; wait = min(2*wait, recordRetryMax) {
		c.log.Warn("completed record not stored; trying again", "message_id", id, "err", err)
		if !c.sleep(wait) {
			return err
		}
		sctx := c.storeCtx(c.o.Completed)
		err = c.o.Completed.Record(c.call(sctx), c.id, id, fp)
		sctx.Release()
	}
	return nil
}

// sleep waits d on the Channel's clock; false if the channel closed first.
func (c *Channel) sleep(d time.Duration) bool {
	done := make(chan struct{})
	t := c.o.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-c.ctx.Done():
		t.Stop()
		return false
	}
}
