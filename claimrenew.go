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
	next    time.Time // when the next renewal starts, on the Channel's clock
	timer   clock.Timer
	running sync.WaitGroup // the renewal in flight, which stop waits for
}

// renewClaim starts renewing c's claim on message id, held by owner and
// claimed at from.
func (c *Channel) renewClaim(cr ClaimRenewer, id, owner string, from time.Time) *claimRenewal {
	r := &claimRenewal{c: c, cr: cr, id: id, owner: owner, next: from.Add(c.o.ClaimLease / 3)}
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
		return
	}
	r.schedule()
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
// Channel's clock, until it succeeds, sctx's deadline passes or the
// channel closes, and returns the last error. Only with a ClaimRenewer:
// the claim stays live meanwhile, so no other owner posts the message
// again while the record is retried, and a success leaves nothing
// orphaned.
func (c *Channel) retryRecord(sctx *storectx.Context, id string, fp Fingerprint, err error) error {
	for wait := recordRetryMin; err != nil; wait = min(2*wait, recordRetryMax) {
		c.log.Warn("completed record not stored; trying again", "message_id", id, "err", err)
		if deadline, _ := sctx.Deadline(); !c.o.Clock.Now().Add(wait).Before(deadline) || !c.sleep(wait) {
			return err
		}
		err = c.o.Completed.Record(c.call(sctx), c.id, id, fp)
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
