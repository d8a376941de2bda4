package connector

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// countedStore is the Store every layer of the kit uses: Options.Store
// (or the memory one) counting its errors in imv2_store_errors_total,
// telling the pending gauges what the pending store took and gave back,
// and keeping the outcome of the last write for /readyz, which reuses a
// recent success instead of writing a probe (probes.go). Optional
// capabilities of the Store (imv2.ClaimStore, state.BindingUpdater,
// state.ConnectorRegistry) are kept by the views below, never invented.
type countedStore struct {
	s     state.Store
	m     *kitMetrics
	clock clock.Clock

	mu      sync.Mutex
	okAt    time.Time // the last successful write's end
	failAt  time.Time // the last failed write's end (a store fault, not a designed refusal)
	failErr error     // and its error
}

func newCountedStore(s state.Store, m *kitMetrics, clk clock.Clock) *countedStore {
	return &countedStore{s: s, m: m, clock: clk}
}

// count counts err, unless it is the store working as designed (a full
// pending queue, a conflicting message ID), and returns it.
func (c *countedStore) count(store, op string, err error) error {
	if err == nil {
		return nil
	}
	var ie *imv2.Error
	if errors.As(err, &ie) && (ie.Code == imv2.CodePendingFull || ie.Code == imv2.CodeMessageIDConflict) {
		return err
	}
	c.m.storeErrors.With(store, op).Inc()
	return err
}

// write counts a write's error and keeps its outcome for /readyz.
func (c *countedStore) write(store, op string, err error) error {
	now := c.clock.Now()
	c.mu.Lock()
	switch {
	case err == nil:
		c.okAt = now
	case storeFault(err):
		c.failAt, c.failErr = now, err
	}
	c.mu.Unlock()
	return c.count(store, op, err)
}

// storeFault reports whether err says the store failed, rather than
// refused as designed (a full pending queue, a conflicting message ID) or
// gave up because its caller did (a cancelled context).
func storeFault(err error) bool {
	var ie *imv2.Error
	if errors.As(err, &ie) && (ie.Code == imv2.CodePendingFull || ie.Code == imv2.CodeMessageIDConflict) {
		return false
	}
	return !errors.Is(err, context.Canceled)
}

// writable reports whether the store takes writes, for /readyz: a write
// of the kit's that failed since the previous verdict (since) or within
// ReadyInterval, with none succeeding after it, says no; one that
// succeeded within ReadyInterval says yes; otherwise a probe writes.
func (c *countedStore) writable(ctx context.Context, since time.Time) error {
	now := c.clock.Now()
	c.mu.Lock()
	okAt, failAt, failErr := c.okAt, c.failAt, c.failErr
	c.mu.Unlock()
	if w := now.Add(-ReadyInterval); since.IsZero() || w.Before(since) {
		since = w
	}
	switch {
	case !failAt.IsZero() && !failAt.Before(since) && !okAt.After(failAt):
		return failErr
	case !okAt.IsZero() && now.Sub(okAt) < ReadyInterval:
		return nil
	}
	return c.probe(ctx)
}

// probe proves the store takes writes: it registers and forgets a channel
// ID issued IDs never take. Its errors count; its outcome is not a real
// write's (a probe that passed says nothing of the next one).
func (c *countedStore) probe(ctx context.Context) error {
	if err := c.count("registry", "register", c.s.Register(ctx, readyProbeChannel)); err != nil {
		return err
	}
	return c.count("registry", "forget", c.s.Forget(ctx, readyProbeChannel))
}

func (c *countedStore) Add(ctx context.Context, e imv2.PendingEntry) error {
	err := c.write("pending", "add", c.s.Add(ctx, e))
	if err == nil {
		c.m.stored(finalKey{e.ChannelID, e.Message.MessageID})
	}
	return err
}

func (c *countedStore) Remove(ctx context.Context, channelID, messageID string) error {
	err := c.write("pending", "remove", c.s.Remove(ctx, channelID, messageID))
	if err == nil {
		c.m.removed(finalKey{channelID, messageID})
	}
	return err
}

func (c *countedStore) List(ctx context.Context, channelID string) ([]imv2.PendingEntry, error) {
	l, err := c.s.List(ctx, channelID)
	return l, c.count("pending", "list", err)
}

func (c *countedStore) Lookup(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, bool, error) {
	fp, ok, err := c.s.Lookup(ctx, channelID, messageID)
	return fp, ok, c.count("completed", "lookup", err)
}

func (c *countedStore) Record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint) error {
	return c.write("completed", "record", c.s.Record(ctx, channelID, messageID, fp))
}

func (c *countedStore) DropChannel(ctx context.Context, channelID string) error {
	return c.write("completed", "drop_channel", c.s.DropChannel(ctx, channelID))
}

func (c *countedStore) Handover(ctx context.Context, from, to string) error {
	return c.write("completed", "handover", c.s.Handover(ctx, from, to))
}

func (c *countedStore) Known(ctx context.Context, channelID string) (bool, error) {
	ok, err := c.s.Known(ctx, channelID)
	return ok, c.count("registry", "known", err)
}

func (c *countedStore) Register(ctx context.Context, channelID string) error {
	return c.write("registry", "register", c.s.Register(ctx, channelID))
}

func (c *countedStore) Forget(ctx context.Context, channelID string) error {
	return c.write("registry", "forget", c.s.Forget(ctx, channelID))
}

func (c *countedStore) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	ch, err := c.s.Bind(ctx, b)
	return ch, c.write("bindings", "bind", err)
}

func (c *countedStore) Binding(ctx context.Context, channelID string) (state.Binding, bool, error) {
	b, ok, err := c.s.Binding(ctx, channelID)
	return b, ok, c.count("bindings", "binding", err)
}

func (c *countedStore) Unbind(ctx context.Context, channelID string) (state.BindingChange, error) {
	ch, err := c.s.Unbind(ctx, channelID)
	return ch, c.write("bindings", "unbind", err)
}

func (c *countedStore) Channels(ctx context.Context, key string) ([]string, error) {
	ids, err := c.s.Channels(ctx, key)
	return ids, c.count("bindings", "channels", err)
}

// completed is the view the Channels get as their CompletedStore, with
// exactly the Store's claim capabilities: a ClaimStore when the Store is
// one, so they still claim before posting; a ClaimRenewer and a
// ClaimStarter when it is, so they renew their claims while a post runs
// and record that a post began (hiding Begin would make every orphan's
// outcome unknown, hiding RenewClaim would let a slow post's claim lapse);
// a state.ResultStore when it is, so a tool call's answer is kept (W13).
func (c *countedStore) completed() imv2.CompletedStore {
	cs, ok := c.s.(imv2.ClaimStore)
	if !ok {
		return c
	}
	v := claimView{c, cs}
	cr, renews := c.s.(imv2.ClaimRenewer)
	st, starts := c.s.(imv2.ClaimStarter)
	rs, keeps := c.s.(state.ResultStore)
	r, b, k := renewer{c, cr}, starter{c, st}, resultCounter{c, rs}
	switch {
	case renews && starts && keeps:
		return struct {
			claimView
			renewer
			starter
			resultCounter
		}{v, r, b, k}
	case renews && starts:
		return struct {
			claimView
			renewer
			starter
		}{v, r, b}
	case renews && keeps:
		return struct {
			claimView
			renewer
			resultCounter
		}{v, r, k}
	case starts && keeps:
		return struct {
			claimView
			starter
			resultCounter
		}{v, b, k}
	case renews:
		return struct {
			claimView
			renewer
		}{v, r}
	case starts:
		return struct {
			claimView
			starter
		}{v, b}
	case keeps:
		return struct {
			claimView
			resultCounter
		}{v, k}
	}
	return v
}

// renewer, starter and resultCounter each add one optional capability
// of the Store to a claimView, its calls counted.

// resultCounter counts a ResultStore's calls as the completed store's.
type resultCounter struct {
	c  *countedStore
	rs state.ResultStore
}

func (r resultCounter) RecordResult(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, result []byte) error {
	return r.c.write("completed", "record", r.rs.RecordResult(ctx, channelID, messageID, fp, result))
}

func (r resultCounter) LookupResult(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, []byte, bool, error) {
	fp, res, ok, err := r.rs.LookupResult(ctx, channelID, messageID)
	return fp, res, ok, r.c.count("completed", "lookup", err)
}

type renewer struct {
	counted *countedStore
	cr      imv2.ClaimRenewer
}

func (r renewer) RenewClaim(ctx context.Context, channelID, messageID, owner string, lease time.Duration) (bool, error) {
	held, err := r.cr.RenewClaim(ctx, channelID, messageID, owner, lease)
	return held, r.counted.write("completed", "renew_claim", err)
}

type starter struct {
	counted *countedStore
	st      imv2.ClaimStarter
}

func (s starter) Begin(ctx context.Context, channelID, messageID, owner string) error {
	return s.counted.write("completed", "begin", s.st.Begin(ctx, channelID, messageID, owner))
}

type claimView struct {
	*countedStore
	cs imv2.ClaimStore
}

func (v claimView) Claim(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	cl, err := v.cs.Claim(ctx, channelID, messageID, fp, owner, lease)
	return cl, v.write("completed", "claim", err)
}

func (v claimView) Release(ctx context.Context, channelID, messageID, owner string) error {
	return v.write("completed", "release", v.cs.Release(ctx, channelID, messageID, owner))
}

// registry is the view the data plane gets as its ChannelRegistry: a
// ConnectorRegistry when the Store is one.
func (c *countedStore) registry() state.ChannelRegistry {
	if cr, ok := c.s.(state.ConnectorRegistry); ok {
		return connectorsView{c, cr}
	}
	return c
}

type connectorsView struct {
	*countedStore
	cr state.ConnectorRegistry
}

func (v connectorsView) SeenConnector(ctx context.Context, connectorID string, t time.Time) error {
	return v.write("registry", "seen_connector", v.cr.SeenConnector(ctx, connectorID, t))
}

func (v connectorsView) ConnectorSeen(ctx context.Context, connectorID string) (time.Time, bool, error) {
	t, ok, err := v.cr.ConnectorSeen(ctx, connectorID)
	return t, ok, v.count("registry", "connector_seen", err)
}

// kitStore is the view the kit itself uses: a BindingUpdater when the
// Store is one (UpdateBinding's compare-and-swap).
func (c *countedStore) kitStore() state.Store {
	if u, ok := c.s.(state.BindingUpdater); ok {
		return updaterView{c, u}
	}
	return c
}

type updaterView struct {
	*countedStore
	u state.BindingUpdater
}

func (v updaterView) Update(ctx context.Context, channelID string, f func(*state.Binding) error) (state.Binding, bool, error) {
	var ferr error // f's refusal is the caller's, not a store failure
	b, ok, err := v.u.Update(ctx, channelID, func(b *state.Binding) error { ferr = f(b); return ferr })
	if ferr != nil && errors.Is(err, ferr) {
		return b, ok, err
	}
	return b, ok, v.write("bindings", "update", err)
}
