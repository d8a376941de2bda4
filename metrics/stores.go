package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/xagentkit/imv2"
)

// Pending returns s counting its errors in imv2_store_errors_total
// {store="pending"}. Errors pass through unchanged; pending_full and
// message_id_conflict answers are the store working, not failing, and are
// not counted.
func (c *Collector) Pending(s imv2.PendingStore) imv2.PendingStore {
	return &pendingStore{s: s, c: c}
}

// Completed returns s counting its errors in imv2_store_errors_total
// {store="completed"}. The result has exactly the optional capabilities
// of s, no more: when s is an imv2.ClaimStore, ClaimRenewer or
// ClaimStarter, so is the result, so the Channel still claims before its
// Target runs, renews its claims, and records that a post began (a
// wrapper hiding Begin would make every orphan's outcome unknown).
func (c *Collector) Completed(s imv2.CompletedStore) imv2.CompletedStore {
	w := completedStore{s: s, c: c}
	cs, ok := s.(imv2.ClaimStore)
	if !ok {
		return &w
	}
	claims := claimStore{completedStore: w, cs: cs}
	cr, renews := s.(imv2.ClaimRenewer)
	st, starts := s.(imv2.ClaimStarter)
	switch {
	case renews && starts:
		return &claimRenewStarter{claimStore: claims, renewer: renewer{c, cr}, starter: starter{c, st}}
	case renews:
		return &claimRenewer{claimStore: claims, renewer: renewer{c, cr}}
	case starts:
		return &claimStarter{claimStore: claims, starter: starter{c, st}}
	}
	return &claims
}

func (c *Collector) storeErr(store, op string, err error) error {
	if err != nil {
		c.storeErrors.WithLabelValues(store, op).Inc()
	}
	return err
}

type pendingStore struct {
	s imv2.PendingStore
	c *Collector
}

func (p *pendingStore) Add(ctx context.Context, e imv2.PendingEntry) error {
	err := p.s.Add(ctx, e)
	var ie *imv2.Error
	if errors.As(err, &ie) && (ie.Code == imv2.CodePendingFull || ie.Code == imv2.CodeMessageIDConflict) {
		return err
	}
	return p.c.storeErr("pending", "add", err)
}

func (p *pendingStore) Remove(ctx context.Context, channelID, messageID string) error {
	return p.c.storeErr("pending", "remove", p.s.Remove(ctx, channelID, messageID))
}

func (p *pendingStore) List(ctx context.Context, channelID string) ([]imv2.PendingEntry, error) {
	l, err := p.s.List(ctx, channelID)
	return l, p.c.storeErr("pending", "list", err)
}

type completedStore struct {
	s imv2.CompletedStore
	c *Collector
}

func (w *completedStore) Lookup(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, bool, error) {
	fp, ok, err := w.s.Lookup(ctx, channelID, messageID)
	return fp, ok, w.c.storeErr("completed", "lookup", err)
}

func (w *completedStore) Record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint) error {
	return w.c.storeErr("completed", "record", w.s.Record(ctx, channelID, messageID, fp))
}

func (w *completedStore) DropChannel(ctx context.Context, channelID string) error {
	return w.c.storeErr("completed", "drop_channel", w.s.DropChannel(ctx, channelID))
}

func (w *completedStore) Handover(ctx context.Context, from, to string) error {
	return w.c.storeErr("completed", "handover", w.s.Handover(ctx, from, to))
}

type claimStore struct {
	completedStore
	cs imv2.ClaimStore
}

func (w *claimStore) Claim(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	cl, err := w.cs.Claim(ctx, channelID, messageID, fp, owner, lease)
	return cl, w.c.storeErr("completed", "claim", err)
}

func (w *claimStore) Release(ctx context.Context, channelID, messageID, owner string) error {
	return w.c.storeErr("completed", "release", w.cs.Release(ctx, channelID, messageID, owner))
}

// The wrappers of a ClaimStore with one or both of its optional
// capabilities; renewer and starter add one each.
type (
	claimRenewer struct {
		claimStore
		renewer
	}
	claimStarter struct {
		claimStore
		starter
	}
	claimRenewStarter struct {
		claimStore
		renewer
		starter
	}
)

type renewer struct {
	coll *Collector
	cr   imv2.ClaimRenewer
}

func (w renewer) RenewClaim(ctx context.Context, channelID, messageID, owner string, lease time.Duration) (bool, error) {
	held, err := w.cr.RenewClaim(ctx, channelID, messageID, owner, lease)
	return held, w.coll.storeErr("completed", "renew_claim", err)
}

type starter struct {
	coll *Collector
	st   imv2.ClaimStarter
}

func (w starter) Begin(ctx context.Context, channelID, messageID, owner string) error {
	return w.coll.storeErr("completed", "begin", w.st.Begin(ctx, channelID, messageID, owner))
}
