package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/storetest"
)

// The suite is only worth running if it fails on broken stores. Each
// mutant below wraps a correct in-memory store and breaks one promise;
// TestSuiteCatchesBrokenStores runs the suite on each mutant in a child
// process and checks that the subtests guarding that promise fail.

const mutantEnv = "STORETEST_MUTANT"

type mutant struct {
	name string
	// wantFail are subtests of TestSuiteSubject that must fail.
	wantFail  []string
	pending   func(capacity int) imv2.PendingStore
	completed func(capacity int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore
	// reopenLoses makes both reopeners return an empty store.
	reopenLoses bool
	// coupled makes a pending Remove also drop the completed record.
	coupled bool
	// claim wraps the claim store under test.
	claim func(s imv2.ClaimStore) imv2.ClaimStore
	// binding wraps the binding store under test.
	binding func(s *state.MemoryBindingStore) state.BindingStore
	// channels makes the channel store under test, holding at most
	// capacity IDs.
	channels func(capacity int) state.ChannelStore
}

var mutants = []mutant{
	{name: "pending-newest-first", wantFail: []string{"Pending/S1_AddListRemove", "Pending/S1_OrderIsAddOrder"},
		pending: func(c int) imv2.PendingStore { return reversed{imv2.NewMemoryPendingStore(c)} }},
	{name: "pending-no-cap", wantFail: []string{"Pending/S1_CapPerChannel"},
		pending: func(c int) imv2.PendingStore { return imv2.NewMemoryPendingStore(c + 1) }},
	{name: "pending-no-conflict", wantFail: []string{"Pending/S6_ReAddOtherContentConflicts", "Pending/S1_S8_Reopen"},
		pending: func(c int) imv2.PendingStore { return noConflict{imv2.NewMemoryPendingStore(c)} }},
	{name: "pending-readd-replaces", wantFail: []string{"Pending/S2_ReAddSameContentIsNoop"},
		pending: func(c int) imv2.PendingStore { return replacing{imv2.NewMemoryPendingStore(c)} }},
	{name: "pending-lossy", wantFail: []string{"Pending/S1_ListIsFullContent"},
		pending: func(c int) imv2.PendingStore { return lossy{imv2.NewMemoryPendingStore(c)} }},
	{name: "pending-one-channel", wantFail: []string{"Pending/S1_ChannelsIndependent"},
		pending: func(c int) imv2.PendingStore { return oneChannel{imv2.NewMemoryPendingStore(c * 10)} }},
	{name: "completed-no-ttl", wantFail: []string{"Completed/S4_TTL", "Completed/S4_ReRecordRestartsTTL", "Completed/S8_Reopen"},
		completed: func(c int, ttl time.Duration, _ clock.Clock) imv2.CompletedStore {
			return imv2.NewMemoryCompletedStore(c, ttl, fakeclock.New(time.Now()))
		}},
	{name: "completed-cap-plus-one", wantFail: []string{"Completed/S4_CapEvictsOldestFirst", "Completed/S8_Reopen"},
		completed: func(c int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return imv2.NewMemoryCompletedStore(c+1, ttl, clock)
		}},
	{name: "completed-drop-all", wantFail: []string{"Completed/S7_DropChannel"},
		completed: func(c int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return &dropAll{c: c, ttl: ttl, clock: clock, s: imv2.NewMemoryCompletedStore(c, ttl, clock)}
		}},
	{name: "completed-wrong-fingerprint", wantFail: []string{"Completed/S6_FingerprintExact"},
		completed: func(c int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return flipFP{imv2.NewMemoryCompletedStore(c, ttl, clock)}
		}},
	{name: "completed-one-channel", wantFail: []string{"Completed/S6_LookupAfterRecord", "Completed/S7_DropChannel"},
		completed: func(c int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return oneChannelCompleted{imv2.NewMemoryCompletedStore(c, ttl, clock)}
		}},
	{name: "completed-handover-copies-nothing", wantFail: []string{"Completed/S6_Handover"},
		completed: func(c int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return noHandover{imv2.NewMemoryCompletedStore(c, ttl, clock)}
		}},
	{name: "completed-handover-renews", wantFail: []string{"Completed/S6_Handover"},
		completed: func(c int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return renewingHandover{imv2.NewMemoryCompletedStore(c, ttl, clock), clock}
		}},
	{name: "reopen-loses-everything", reopenLoses: true, wantFail: []string{"Pending/S1_S8_Reopen", "Completed/S8_Reopen", "Binding/S8_W5_Reopen", "Channels/S8_W11_Reopen"}},
	{name: "channels-newest-first", wantFail: []string{"Channels/W11_OrderIsAddOrder", "Channels/W11_ReAddKeepsPlace", "Channels/W11_RemoveThenAddGoesLast", "Channels/S8_W11_Reopen"},
		channels: func(c int) state.ChannelStore { return reversedChannels{state.NewMemoryChannelStore(c)} }},
	{name: "channels-no-cap", wantFail: []string{"Channels/W11_CapRefusesNew", "Channels/W11_ConcurrentAddsKeepTheCap"},
		channels: func(c int) state.ChannelStore { return state.NewMemoryChannelStore(c + 1) }},
	{name: "channels-readd-moves-last", wantFail: []string{"Channels/W11_ReAddKeepsPlace"},
		channels: func(c int) state.ChannelStore { return movingChannels{state.NewMemoryChannelStore(c)} }},
	{name: "channels-connector-id-first-wins", wantFail: []string{"Channels/W11_ConnectorIDLastWins"},
		channels: func(c int) state.ChannelStore { return firstConnectorID{state.NewMemoryChannelStore(c)} }},
	{name: "channels-cap-untyped-error", wantFail: []string{"Channels/W11_CapRefusesNew"},
		channels: func(c int) state.ChannelStore { return untypedCap{state.NewMemoryChannelStore(c)} }},
	{name: "channels-cap-checked-apart", wantFail: []string{"Channels/W11_ConcurrentAddsKeepTheCap"},
		channels: func(c int) state.ChannelStore { return capApart{state.NewMemoryChannelStore(c + 100), c} }},
	{name: "binding-rebind-keeps-old-key", wantFail: []string{"Binding/W6_RebindReplaces"},
		binding: func(s *state.MemoryBindingStore) state.BindingStore {
			return stickyKey{s, new(sync.Mutex), map[string]string{}}
		}},
	{name: "binding-channels-unsorted", wantFail: []string{"Binding/W6_ChannelsOfAKey", "Binding/W6_ConcurrentBinds"},
		binding: func(s *state.MemoryBindingStore) state.BindingStore { return unsortedChannels{s} }},
	{name: "binding-drops-data", wantFail: []string{"Binding/W6_BindReadUnbind", "Binding/W6_DataAndDraftsKept", "Binding/S8_W5_Reopen"},
		binding: func(s *state.MemoryBindingStore) state.BindingStore { return dropsData{s} }},
	{name: "binding-release-by-separate-read", wantFail: []string{"Binding/W6_ConcurrentRebindsReleaseOnce"},
		binding: func(s *state.MemoryBindingStore) state.BindingStore { return releaseByRead{s} }},
	{name: "binding-update-in-two-steps", wantFail: []string{"Binding/W6_ConcurrentUpdatesKeepAll", "Binding/W6_UpdateNeverUndoesUnbind"},
		binding: func(s *state.MemoryBindingStore) state.BindingStore { return twoStepUpdate{s} }},
	{name: "binding-update-unchecked", wantFail: []string{"Binding/W6_UpdateInPlace"},
		binding: func(s *state.MemoryBindingStore) state.BindingStore { return uncheckedUpdate{s} }},
	{name: "coupled-stores", coupled: true, wantFail: []string{"Independent"}},
	{name: "claim-never-held", wantFail: []string{"Claim/A6_HeldByAnotherOwner", "Claim/A6_ConcurrentOwnersOneAcquires"},
		claim: func(s imv2.ClaimStore) imv2.ClaimStore { return neverHeld{s} }},
	{name: "claim-lease-forever", wantFail: []string{"Claim/S8_LeaseExpiryOrphans"},
		claim: func(s imv2.ClaimStore) imv2.ClaimStore { return leaseForever{s} }},
	{name: "claim-release-any-owner", wantFail: []string{"Claim/S8_Release"},
		claim: func(s imv2.ClaimStore) imv2.ClaimStore { return releaseAny{s} }},
	{name: "claim-takeover-replaces-fingerprint", wantFail: []string{"Claim/S6_OrphanTakeoverKeepsFingerprint"},
		claim: func(s imv2.ClaimStore) imv2.ClaimStore { return replacingTakeover{s} }},
	{name: "claim-handover-records-only", wantFail: []string{"Claim/S8_HandoverCopiesClaims"},
		claim: func(s imv2.ClaimStore) imv2.ClaimStore { return recordsOnlyHandover{s} }},
}

// TestSuiteSubject runs the suite on the mutant named by $STORETEST_MUTANT,
// or on the correct in-memory stores when it is unset, where it must pass.
func TestSuiteSubject(t *testing.T) {
	m := mutant{}
	if name := os.Getenv(mutantEnv); name != "" {
		i := slices.IndexFunc(mutants, func(m mutant) bool { return m.name == name })
		if i < 0 {
			t.Fatalf("unknown mutant %q", name)
		}
		m = mutants[i]
	}
	if m.pending == nil {
		m.pending = func(c int) imv2.PendingStore { return imv2.NewMemoryPendingStore(c) }
	}
	if m.completed == nil {
		m.completed = func(c int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
			return imv2.NewMemoryCompletedStore(c, ttl, clock)
		}
	}
	// The memory stores are not durable; the reopeners stand in for a
	// durable store by handing back the same store (which a durable store
	// must be indistinguishable from), or an empty one for the mutant.
	caps := map[imv2.PendingStore]int{}
	var mu sync.Mutex
	newPending := func(t *testing.T, capacity int) imv2.PendingStore {
		s := m.pending(capacity)
		mu.Lock()
		caps[s] = capacity
		mu.Unlock()
		return s
	}
	reopenPending := func(t *testing.T, s imv2.PendingStore) imv2.PendingStore {
		if m.reopenLoses {
			mu.Lock()
			defer mu.Unlock()
			return m.pending(caps[s])
		}
		return s
	}
	type args struct {
		capacity int
		ttl      time.Duration
		clock    clock.Clock
	}
	completedArgs := map[imv2.CompletedStore]args{}
	newCompleted := func(t *testing.T, capacity int, ttl time.Duration, clock clock.Clock) imv2.CompletedStore {
		s := m.completed(capacity, ttl, clock)
		mu.Lock()
		completedArgs[s] = args{capacity, ttl, clock}
		mu.Unlock()
		return s
	}
	reopenCompleted := func(t *testing.T, s imv2.CompletedStore) imv2.CompletedStore {
		if m.reopenLoses {
			mu.Lock()
			defer mu.Unlock()
			a := completedArgs[s]
			return m.completed(a.capacity, a.ttl, a.clock)
		}
		return s
	}
	t.Run("Pending", func(t *testing.T) { storetest.TestPendingStore(t, newPending, reopenPending) })
	t.Run("Completed", func(t *testing.T) { storetest.TestCompletedStore(t, newCompleted, reopenCompleted) })
	t.Run("Claim", func(t *testing.T) {
		storetest.TestClaimStore(t, func(t *testing.T, ttl time.Duration, clock clock.Clock) imv2.ClaimStore {
			s := imv2.NewMemoryCompletedStore(0, ttl, clock)
			if m.claim != nil {
				return m.claim(s)
			}
			return s
		}, nil)
	})
	t.Run("Binding", func(t *testing.T) {
		newBinding := func(*testing.T) state.BindingStore {
			s := state.NewMemoryBindingStore(0)
			if m.binding != nil {
				return m.binding(s)
			}
			return s
		}
		storetest.TestBindingStore(t, newBinding, func(t *testing.T, s state.BindingStore) state.BindingStore {
			if m.reopenLoses {
				return newBinding(t)
			}
			return s
		})
	})
	t.Run("Channels", func(t *testing.T) {
		const capacity = 20
		newChannels := func(*testing.T) state.ChannelStore {
			if m.channels != nil {
				return m.channels(capacity)
			}
			return state.NewMemoryChannelStore(capacity)
		}
		storetest.TestChannelStore(t, newChannels, capacity, func(t *testing.T, s state.ChannelStore) state.ChannelStore {
			if m.reopenLoses {
				return newChannels(t)
			}
			return s
		})
	})
	t.Run("Independent", func(t *testing.T) {
		storetest.TestIndependent(t, func(t *testing.T) (imv2.PendingStore, imv2.CompletedStore) {
			p, c := m.pending(0), m.completed(0, 0, nil)
			if m.coupled {
				return coupled{p, c}, c
			}
			return p, c
		})
	})
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Fatalf("%s is set: run TestSuiteSubject alone", mutantEnv)
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteSubject$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+m.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed (or did not run: %v) on a broken store:\n%s", err, out)
			}
			for _, sub := range m.wantFail {
				if !strings.Contains(string(out), "--- FAIL: TestSuiteSubject/"+sub+" ") {
					t.Errorf("subtest %s did not fail on mutant %s:\n%s", sub, m.name, out)
				}
			}
		})
	}
}

// stickyKey leaves a rebound channel listed under its old key too.
// Its map has a lock of its own: the suite binds concurrently, and a
// mutant that dies of concurrent map writes takes the failures of the
// subtests before with it (the test binary's output ends at the crash).
type stickyKey struct {
	*state.MemoryBindingStore
	mu  *sync.Mutex
	old map[string]string
}

func (s stickyKey) Channels(ctx context.Context, key string) ([]string, error) {
	ids, err := s.MemoryBindingStore.Channels(ctx, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch, k := range s.old {
		if k == key && !slices.Contains(ids, ch) {
			ids = append(ids, ch)
		}
	}
	return ids, err
}

func (s stickyKey) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	if old, ok, _ := s.MemoryBindingStore.Binding(ctx, b.ChannelID); ok {
		s.mu.Lock()
		s.old[b.ChannelID] = old.Key
		s.mu.Unlock()
	}
	return s.MemoryBindingStore.Bind(ctx, b)
}

// dropsData keeps everything of a binding but its Data.
type dropsData struct{ *state.MemoryBindingStore }

func (s dropsData) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	b.Data = nil
	return s.MemoryBindingStore.Bind(ctx, b)
}

// releaseByRead decides Released from a Channels read after its change,
// as the kit once did: right when the changes come one at a time, wrong
// when two last channels of a key leave at once (both read none left) or
// a channel joins between the change and the read.
type releaseByRead struct{ *state.MemoryBindingStore }

func (s releaseByRead) decide(ctx context.Context, ch state.BindingChange, err error, moved bool) (state.BindingChange, error) {
	if err != nil || !ch.Had || !moved {
		ch.Released = false
		return ch, err
	}
	time.Sleep(200 * time.Microsecond) // the window a real store's round trip opens
	left, err := s.MemoryBindingStore.Channels(ctx, ch.Old.Key)
	ch.Released = len(left) == 0
	return ch, err
}

func (s releaseByRead) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	ch, err := s.MemoryBindingStore.Bind(ctx, b)
	return s.decide(ctx, ch, err, ch.Old.Key != b.Key)
}

func (s releaseByRead) Unbind(ctx context.Context, channelID string) (state.BindingChange, error) {
	ch, err := s.MemoryBindingStore.Unbind(ctx, channelID)
	return s.decide(ctx, ch, err, true)
}

// twoStepUpdate updates as the kit did before BindingUpdater: a read,
// then f, then a Bind, each a step of its own, so a change between the
// read and the Bind is undone.
type twoStepUpdate struct{ *state.MemoryBindingStore }

func (s twoStepUpdate) Update(ctx context.Context, channelID string, f func(*state.Binding) error) (state.Binding, bool, error) {
	old, ok, err := s.Binding(ctx, channelID)
	if err != nil || !ok {
		return old, ok, err
	}
	b := old
	b.Data, b.Drafts = slices.Clone(old.Data), slices.Clone(old.Drafts)
	if err := f(&b); err != nil {
		return old, true, err
	}
	_, err = s.Bind(ctx, b)
	return old, true, err
}

// uncheckedUpdate stores whatever f leaves, a moved key or channel too
// (through Bind, which checks only CheckBinding).
type uncheckedUpdate struct{ *state.MemoryBindingStore }

func (s uncheckedUpdate) Update(ctx context.Context, channelID string, f func(*state.Binding) error) (state.Binding, bool, error) {
	var old state.Binding
	var found bool
	_, _, err := s.MemoryBindingStore.Update(ctx, channelID, func(b *state.Binding) error {
		old, found = *b, true
		return nil
	})
	if err != nil || !found {
		return old, found, err
	}
	b := old
	if err := f(&b); err != nil {
		return old, true, err
	}
	_, err = s.Bind(ctx, b)
	return old, true, err
}

// unsortedChannels lists a key's channels in reverse order.
type unsortedChannels struct{ *state.MemoryBindingStore }

func (s unsortedChannels) Channels(ctx context.Context, key string) ([]string, error) {
	ids, err := s.MemoryBindingStore.Channels(ctx, key)
	slices.Reverse(ids)
	return ids, err
}

// reversedChannels lists the channel IDs newest first.
type reversedChannels struct{ *state.MemoryChannelStore }

func (r reversedChannels) ChannelIDs(ctx context.Context) ([]string, error) {
	ids, err := r.MemoryChannelStore.ChannelIDs(ctx)
	slices.Reverse(ids)
	return ids, err
}

// movingChannels moves a re-added ID to the back.
type movingChannels struct{ *state.MemoryChannelStore }

func (m movingChannels) AddChannel(ctx context.Context, id string) error {
	if err := m.RemoveChannel(ctx, id); err != nil {
		return err
	}
	return m.MemoryChannelStore.AddChannel(ctx, id)
}

// firstConnectorID keeps the first connector_id set.
type firstConnectorID struct{ *state.MemoryChannelStore }

func (f firstConnectorID) SetConnectorID(ctx context.Context, id string) error {
	if old, err := f.ConnectorID(ctx); err != nil || old != "" {
		return err
	}
	return f.MemoryChannelStore.SetConnectorID(ctx, id)
}

// untypedCap refuses beyond the cap with a plain error, as boltstore
// once did: a caller cannot tell it from a broken store.
type untypedCap struct{ *state.MemoryChannelStore }

func (u untypedCap) AddChannel(ctx context.Context, id string) error {
	if err := u.MemoryChannelStore.AddChannel(ctx, id); err != nil {
		return errors.New(err.Error())
	}
	return nil
}

// capApart checks its cap with a read apart from the insert, so racing
// Adds all pass the check.
type capApart struct {
	*state.MemoryChannelStore
	capacity int
}

func (c capApart) AddChannel(ctx context.Context, id string) error {
	ids, err := c.ChannelIDs(ctx)
	if err != nil {
		return err
	}
	if len(ids) >= c.capacity && !slices.Contains(ids, id) {
		return imv2.Errorf(imv2.CodeChannelUnavailable, "%d channels, the cap", c.capacity)
	}
	time.Sleep(200 * time.Microsecond) // the window a real store's round trip opens
	return c.MemoryChannelStore.AddChannel(ctx, id)
}

// reversed lists newest first.
type reversed struct{ imv2.PendingStore }

func (r reversed) List(ctx context.Context, ch string) ([]imv2.PendingEntry, error) {
	l, err := r.PendingStore.List(ctx, ch)
	slices.Reverse(l)
	return l, err
}

// noConflict accepts a re-Add with other content silently.
type noConflict struct{ imv2.PendingStore }

func (n noConflict) Add(ctx context.Context, e imv2.PendingEntry) error {
	if err := n.PendingStore.Add(ctx, e); !errors.Is(err, &imv2.Error{Code: imv2.CodeMessageIDConflict}) {
		return err
	}
	return nil
}

// replacing lets a re-Add overwrite the pending entry.
type replacing struct{ imv2.PendingStore }

func (r replacing) Add(ctx context.Context, e imv2.PendingEntry) error {
	if err := r.Remove(ctx, e.ChannelID, e.Message.MessageID); err != nil {
		return err
	}
	return r.PendingStore.Add(ctx, e)
}

// lossy keeps Created at millisecond precision only.
type lossy struct{ imv2.PendingStore }

func (l lossy) Add(ctx context.Context, e imv2.PendingEntry) error {
	e.Created = e.Created.Truncate(time.Millisecond)
	return l.PendingStore.Add(ctx, e)
}

// oneChannel keys entries by message_id alone.
type oneChannel struct{ imv2.PendingStore }

func (o oneChannel) Add(ctx context.Context, e imv2.PendingEntry) error {
	ch := e.ChannelID
	e.ChannelID = ""
	err := o.PendingStore.Add(ctx, e)
	if errors.Is(err, &imv2.Error{Code: imv2.CodeMessageIDConflict}) && ch != "" {
		return nil
	}
	return err
}

func (o oneChannel) Remove(ctx context.Context, _, id string) error {
	return o.PendingStore.Remove(ctx, "", id)
}

func (o oneChannel) List(ctx context.Context, ch string) ([]imv2.PendingEntry, error) {
	l, err := o.PendingStore.List(ctx, "")
	for i := range l {
		l[i].ChannelID = ch
	}
	return l, err
}

// dropAll forgets every channel on DropChannel.
type dropAll struct {
	mu    sync.Mutex
	c     int
	ttl   time.Duration
	clock clock.Clock
	s     imv2.ClaimStore
}

func (d *dropAll) store() imv2.ClaimStore {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.s
}

func (d *dropAll) Lookup(ctx context.Context, ch, id string) (imv2.Fingerprint, bool, error) {
	return d.store().Lookup(ctx, ch, id)
}

func (d *dropAll) Record(ctx context.Context, ch, id string, fp imv2.Fingerprint) error {
	return d.store().Record(ctx, ch, id, fp)
}

func (d *dropAll) DropChannel(context.Context, string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.s = imv2.NewMemoryCompletedStore(d.c, d.ttl, d.clock)
	return nil
}

func (d *dropAll) Handover(ctx context.Context, from, to string) error {
	return d.store().Handover(ctx, from, to)
}

// noHandover copies no record on Handover.
type noHandover struct{ imv2.ClaimStore }

func (noHandover) Handover(context.Context, string, string) error { return nil }

// renewingHandover copies records as new ones, restarting their TTL.
type renewingHandover struct {
	imv2.ClaimStore
	clock clock.Clock
}

func (r renewingHandover) Handover(ctx context.Context, from, to string) error {
	for _, id := range []string{"m1", "m2", "m3"} { // the IDs the suite uses
		if fp, ok, _ := r.Lookup(ctx, from, id); ok {
			if err := r.Record(ctx, to, id, fp); err != nil {
				return err
			}
		}
	}
	return nil
}

// flipFP returns a fingerprint that differs in one bit.
type flipFP struct{ imv2.ClaimStore }

func (f flipFP) Lookup(ctx context.Context, ch, id string) (imv2.Fingerprint, bool, error) {
	fp, ok, err := f.ClaimStore.Lookup(ctx, ch, id)
	fp[31] ^= 1
	return fp, ok, err
}

// oneChannelCompleted keys records by message_id alone.
type oneChannelCompleted struct{ imv2.ClaimStore }

func (o oneChannelCompleted) Lookup(ctx context.Context, _, id string) (imv2.Fingerprint, bool, error) {
	return o.ClaimStore.Lookup(ctx, "", id)
}

func (o oneChannelCompleted) Record(ctx context.Context, _, id string, fp imv2.Fingerprint) error {
	return o.ClaimStore.Record(ctx, "", id, fp)
}

func (o oneChannelCompleted) DropChannel(ctx context.Context, _ string) error {
	return o.ClaimStore.DropChannel(ctx, "")
}

// coupled is the "delete after send" structure S9 forbids: removing a
// pending message also forgets that it completed.
type coupled struct {
	imv2.PendingStore
	c imv2.CompletedStore
}

func (c coupled) Remove(ctx context.Context, ch, id string) error {
	if err := c.c.DropChannel(ctx, ch); err != nil {
		return err
	}
	return c.PendingStore.Remove(ctx, ch, id)
}

// neverHeld answers a claim held by another owner as if it were free.
type neverHeld struct{ imv2.ClaimStore }

func (n neverHeld) Claim(ctx context.Context, ch, id string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	c, err := n.ClaimStore.Claim(ctx, ch, id, fp, owner, lease)
	if c.State == imv2.ClaimHeld {
		c = imv2.Claim{State: imv2.ClaimAcquired}
	}
	return c, err
}

// leaseForever ignores the lease: a claim never turns orphaned by time.
type leaseForever struct{ imv2.ClaimStore }

func (l leaseForever) Claim(ctx context.Context, ch, id string, fp imv2.Fingerprint, owner string, _ time.Duration) (imv2.Claim, error) {
	return l.ClaimStore.Claim(ctx, ch, id, fp, owner, 1000*time.Hour)
}

// releaseAny releases whoever holds the claim.
type releaseAny struct{ imv2.ClaimStore }

func (r releaseAny) Release(ctx context.Context, ch, id, _ string) error {
	c, err := r.ClaimStore.Claim(ctx, ch, id, imv2.Fingerprint{}, "releaseAny", time.Nanosecond)
	if err != nil {
		return err
	}
	owner := "releaseAny" // it took a free claim itself: drop that
	if c.State == imv2.ClaimHeld {
		owner = c.Owner
	}
	return r.ClaimStore.Release(ctx, ch, id, owner)
}

// replacingTakeover stores the taker's content on an orphan takeover.
type replacingTakeover struct{ imv2.ClaimStore }

func (r replacingTakeover) Claim(ctx context.Context, ch, id string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	c, err := r.ClaimStore.Claim(ctx, ch, id, fp, owner, lease)
	if err != nil || c.State != imv2.ClaimOrphaned {
		return c, err
	}
	if err := r.Release(ctx, ch, id, owner); err != nil {
		return c, err
	}
	_, err = r.ClaimStore.Claim(ctx, ch, id, fp, owner, lease)
	return c, err
}

// recordsOnlyHandover hands completed records over but no claim.
type recordsOnlyHandover struct{ imv2.ClaimStore }

func (r recordsOnlyHandover) Handover(ctx context.Context, from, to string) error {
	for _, id := range []string{"m1", "m2", "m3", "m4"} { // the IDs the suite uses
		if fp, ok, _ := r.Lookup(ctx, from, id); ok {
			if err := r.Record(ctx, to, id, fp); err != nil {
				return err
			}
		}
	}
	return nil
}
