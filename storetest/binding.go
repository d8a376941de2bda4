package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// BindingFactory returns a new, empty BindingStore. It registers its own
// cleanup with t.Cleanup.
type BindingFactory func(t *testing.T) state.BindingStore

// BindingReopener closes s and returns a store on the same data, as after
// a restart.
type BindingReopener func(t *testing.T, s state.BindingStore) state.BindingStore

// TestBindingStore runs the BindingStore contract against stores made by
// newStore: one binding per channel, replaced by a new Bind; many channels
// per conversation key, listed sorted; Unbind returns what it removed; a
// binding is kept whole (key, target, state, creation time to the
// millisecond, Data and Drafts byte for byte, up to MaxBindingData and
// MaxBindingDrafts; beyond them Bind fails). reopen may be nil for a store that is not durable; a
// durable one must keep every binding across it (S8, W5, W6). A store
// that is a state.BindingUpdater must also update in one step: what
// f leaves is stored, nothing when f or the result is refused, racing
// Updates lose no change and an Update racing an Unbind never binds the
// channel again.
func TestBindingStore(t *testing.T, newStore BindingFactory, reopen BindingReopener) {
	t.Run("W6_BindReadUnbind", func(t *testing.T) { bindingRoundTrip(t, newStore) })
	t.Run("W6_RebindReplaces", func(t *testing.T) { bindingReplace(t, newStore) })
	t.Run("W6_ChannelsOfAKey", func(t *testing.T) { bindingChannels(t, newStore) })
	t.Run("W6_UnbindUnknownIsNoop", func(t *testing.T) { bindingUnknown(t, newStore) })
	t.Run("W6_InvalidRefused", func(t *testing.T) { bindingInvalid(t, newStore) })
	t.Run("W6_DataAndDraftsKept", func(t *testing.T) { bindingDataKept(t, newStore) })
	t.Run("W6_ConcurrentBinds", func(t *testing.T) { bindingConcurrent(t, newStore) })
	t.Run("W6_ConcurrentRebindsReleaseOnce", func(t *testing.T) { bindingReleaseOnce(t, newStore) })
	updaterSubtests(t, newStore)
	if reopen != nil {
		t.Run("S8_W5_Reopen", func(t *testing.T) { bindingReopen(t, newStore, reopen) })
	}
}

var bindingEpoch = time.UnixMilli(1_790_000_000_123)

func sampleBinding(ch, key string) state.Binding {
	return state.Binding{
		ChannelID: ch, Key: key, State: state.BindingConnected, Created: bindingEpoch,
		Target: protocol.DescriptorTarget{Provider: "pretend", Label: "Pretend", DisplayName: "Room " + key, AccountHint: "bot@" + key},
		// Any bytes: a token, a cursor, a 0x00, an invalid UTF-8 byte.
		Data:   []byte("token=" + key + "\x00\xff"),
		Drafts: []state.DraftHandle{{MessageID: "m_1", Handle: "$ev1:" + key}, {MessageID: "m_2", Handle: "$ev2\x00\xfe"}},
	}
}

func wantBinding(t *testing.T, s state.BindingStore, want state.Binding) {
	t.Helper()
	got, ok, err := s.Binding(context.Background(), want.ChannelID)
	if err != nil || !ok {
		t.Fatalf("Binding(%q) = found %v, %v; want the binding", want.ChannelID, ok, err)
	}
	if !got.Created.Equal(want.Created) {
		t.Fatalf("Binding(%q).Created = %v; want %v", want.ChannelID, got.Created, want.Created)
	}
	got.Created = want.Created
	if !sameBinding(got, want) {
		t.Fatalf("Binding(%q) = %+v; want %+v", want.ChannelID, got, want)
	}
}

// sameBinding compares two bindings, an empty Data or Drafts equal to a
// nil one.
func sameBinding(a, b state.Binding) bool {
	return a.ChannelID == b.ChannelID && a.Key == b.Key && a.Target == b.Target && a.State == b.State &&
		a.Created.Equal(b.Created) && bytes.Equal(a.Data, b.Data) && slices.Equal(a.Drafts, b.Drafts)
}

func wantChannels(t *testing.T, s state.BindingStore, key string, want ...string) {
	t.Helper()
	got, err := s.Channels(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Channels(%q) = %q; want %q", key, got, want)
	}
}

func mustBind(t *testing.T, s state.BindingStore, b state.Binding) state.BindingChange {
	t.Helper()
	ch, err := s.Bind(context.Background(), b)
	if err != nil {
		t.Fatalf("Bind(%+v): %v", b, err)
	}
	return ch
}

func mustUnbind(t *testing.T, s state.BindingStore, channelID string) state.BindingChange {
	t.Helper()
	ch, err := s.Unbind(context.Background(), channelID)
	if err != nil {
		t.Fatalf("Unbind(%q): %v", channelID, err)
	}
	return ch
}

// wantChange checks a BindingChange: had and released as given, and Old
// the binding replaced when had.
func wantChange(t *testing.T, what string, got state.BindingChange, had bool, old state.Binding, released bool) {
	t.Helper()
	if got.Had != had || got.Released != released || (had && !sameBinding(got.Old, old)) || (!had && got.Old.Key != "") {
		t.Fatalf("%s = %+v; want had %v, released %v, old %+v", what, got, had, released, old)
	}
}

func bindingRoundTrip(t *testing.T, newStore BindingFactory) {
	s, ctx := newStore(t), context.Background()
	b := sampleBinding("ch_1", "room-a")
	b.State = state.BindingExpired
	wantChange(t, "first Bind", mustBind(t, s, b), false, state.Binding{}, false)
	wantBinding(t, s, b)
	revoked := b
	revoked.State = state.BindingRevoked
	wantChange(t, "Bind to the same key", mustBind(t, s, revoked), true, b, false)
	wantBinding(t, s, revoked)
	wantChange(t, "Unbind of the key's last channel", mustUnbind(t, s, "ch_1"), true, revoked, true)
	if _, ok, err := s.Binding(ctx, "ch_1"); ok || err != nil {
		t.Fatalf("Binding after Unbind = found %v, %v", ok, err)
	}
	wantChannels(t, s, "room-a")
}

func bindingReplace(t *testing.T, newStore BindingFactory) {
	s := newStore(t)
	a := sampleBinding("ch_1", "room-a")
	mustBind(t, s, a)
	mustBind(t, s, sampleBinding("ch_2", "room-a"))
	b := sampleBinding("ch_1", "room-b")
	wantChange(t, "rebind off a key still bound", mustBind(t, s, b), true, a, false)
	wantBinding(t, s, b)
	wantChannels(t, s, "room-a", "ch_2")
	wantChannels(t, s, "room-b", "ch_1")
	a2 := sampleBinding("ch_2", "room-a")
	wantChange(t, "rebind off the key's last channel", mustBind(t, s, sampleBinding("ch_2", "room-b")), true, a2, true)
	wantChannels(t, s, "room-a")
	wantChange(t, "Unbind with the key still bound", mustUnbind(t, s, "ch_1"), true, b, false)
}

func bindingChannels(t *testing.T, newStore BindingFactory) {
	s := newStore(t)
	for _, ch := range []string{"ch_3", "ch_1", "ch_2"} {
		mustBind(t, s, sampleBinding(ch, "room-a"))
	}
	mustBind(t, s, sampleBinding("ch_9", "room-a2")) // a key that extends another
	mustBind(t, s, sampleBinding("ch_8", "room"))    // and one another extends
	wantChannels(t, s, "room-a", "ch_1", "ch_2", "ch_3")
	wantChannels(t, s, "room", "ch_8")
	mustUnbind(t, s, "ch_2")
	wantChannels(t, s, "room-a", "ch_1", "ch_3")
	// "room" is released though keys it prefixes are still bound.
	if ch := mustUnbind(t, s, "ch_8"); !ch.Released {
		t.Fatalf("Unbind of the only channel of %q = %+v; want released", "room", ch)
	}
	wantChannels(t, s, "nobody")
}

func bindingUnknown(t *testing.T, newStore BindingFactory) {
	s := newStore(t)
	if ch, err := s.Unbind(context.Background(), "ch_none"); ch.Had || ch.Released || err != nil || ch.Old.Key != "" {
		t.Fatalf("Unbind of an unbound channel = %+v, %v; want nothing", ch, err)
	}
}

func bindingInvalid(t *testing.T, newStore BindingFactory) {
	s := newStore(t)
	for _, b := range []state.Binding{
		{ChannelID: "", Key: "k", State: state.BindingConnected},
		{ChannelID: "ch", Key: "", State: state.BindingConnected},
		{ChannelID: "ch", Key: "a\x00b", State: state.BindingConnected},
		{ChannelID: "ch", Key: "k", State: "maybe"},
		{ChannelID: "ch", Key: "k", State: state.BindingConnected, Data: make([]byte, state.MaxBindingData+1)},
		{ChannelID: "ch", Key: "k", State: state.BindingConnected, Drafts: drafts(state.MaxBindingDrafts+1, 8)},
		{ChannelID: "ch", Key: "k", State: state.BindingConnected, Drafts: drafts(1, state.MaxDraftHandleBytes+1)},
		{ChannelID: "ch", Key: "k", State: state.BindingConnected, Drafts: []state.DraftHandle{{MessageID: "m", Handle: ""}}},
		{ChannelID: "ch", Key: "k", State: state.BindingConnected, Drafts: []state.DraftHandle{{MessageID: "", Handle: "h"}}},
	} {
		if _, err := s.Bind(context.Background(), b); err == nil {
			t.Errorf("Bind(%q) succeeded; want it refused", fmt.Sprintf("%+v", b))
		}
	}
	wantChannels(t, s, "k")
}

// drafts returns n draft handles of handleLen bytes each.
func drafts(n, handleLen int) []state.DraftHandle {
	d := make([]state.DraftHandle, n)
	for i := range d {
		h := []byte(fmt.Sprintf("h%03d", i))
		h = append(h, bytes.Repeat([]byte{'x'}, max(handleLen-len(h), 0))...)
		d[i] = state.DraftHandle{MessageID: fmt.Sprintf("m_%03d", i), Handle: string(h[:handleLen])}
	}
	return d
}

// bindingDataKept: Data and Drafts at their bounds come back whole, in
// order; the store keeps its own copy (a caller changing its slices
// after Bind, or those Binding returned, changes nothing stored); a
// rebind without them clears them.
func bindingDataKept(t *testing.T, newStore BindingFactory) {
	s := newStore(t)
	b := sampleBinding("ch_1", "room-a")
	b.Data = bytes.Repeat([]byte{0, 1, 0xff, 'x'}, state.MaxBindingData/4)
	b.Drafts = drafts(state.MaxBindingDrafts, state.MaxDraftHandleBytes)
	mustBind(t, s, b)
	want := b
	want.Data, want.Drafts = bytes.Clone(b.Data), slices.Clone(b.Drafts)
	b.Data[0], b.Drafts[0].Handle = 'Z', "changed"
	wantBinding(t, s, want)
	got, _, err := s.Binding(context.Background(), "ch_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data) > 0 && len(got.Drafts) > 0 {
		got.Data[0], got.Drafts[0].Handle = 'Z', "changed"
	}
	wantBinding(t, s, want)
	bare := sampleBinding("ch_1", "room-a")
	bare.Data, bare.Drafts = nil, nil
	mustBind(t, s, bare)
	wantBinding(t, s, bare)
}

func bindingConcurrent(t *testing.T, newStore BindingFactory) {
	s := newStore(t)
	together(16, func(i int) {
		if _, err := s.Bind(context.Background(), sampleBinding(fmt.Sprintf("ch_%02d", i), "room")); err != nil {
			t.Error(err)
		}
	})
	want := make([]string, 16)
	for i := range want {
		want[i] = fmt.Sprintf("ch_%02d", i)
	}
	wantChannels(t, s, "room", want...)
}

// bindingReleaseOnce: many goroutines move their channels from key to key
// at once, in rounds: in round r every channel leaves key r-1 for key r
// (beside a rebind that stays on its key), so key r-1's count falls from
// the number of channels to zero exactly once, in that round, while key
// r's rises. Exactly one change of the round must report Released for key
// r-1, and none for any other key; at the end the channels unbind at
// once and exactly one releases the last key. A store that decides
// Released from a read separate from its change releases a key twice (or
// never) here.
func bindingReleaseOnce(t *testing.T, newStore BindingFactory) {
	const channels, rounds = 12, 12
	s, ctx := newStore(t), context.Background()
	key := func(r int) string { return fmt.Sprintf("room-%02d", r) }
	chID := func(i int) string { return fmt.Sprintf("ch_%02d", i) }
	released := map[string]int{}
	var mu sync.Mutex
	note := func(ch state.BindingChange, err error) {
		if err != nil {
			t.Error(err)
			return
		}
		if ch.Released {
			mu.Lock()
			released[ch.Old.Key]++
			mu.Unlock()
		}
	}
	for i := range channels {
		mustBind(t, s, sampleBinding(chID(i), key(0)))
	}
	for r := 1; r <= rounds; r++ {
		together(channels, func(i int) {
			note(s.Bind(ctx, sampleBinding(chID(i), key(r))))
			b := sampleBinding(chID(i), key(r))
			b.State = state.BindingExpired
			note(s.Bind(ctx, b))
		})
		wantChannels(t, s, key(r-1))
	}
	together(channels, func(i int) { note(s.Unbind(ctx, chID(i))) })
	for r := 0; r <= rounds; r++ {
		if n := released[key(r)]; n != 1 {
			t.Errorf("key %s went to zero once and was released %d times", key(r), n)
		}
	}
	if len(released) != rounds+1 {
		t.Errorf("released keys %v; want exactly %s to %s", released, key(0), key(rounds))
	}
}

func bindingReopen(t *testing.T, newStore BindingFactory, reopen BindingReopener) {
	s := newStore(t)
	a, b := sampleBinding("ch_1", "room-a"), sampleBinding("ch_2", "room-a")
	mustBind(t, s, a)
	mustBind(t, s, b)
	mustBind(t, s, sampleBinding("ch_3", "room-c"))
	mustUnbind(t, s, "ch_3")
	s = reopen(t, s)
	wantBinding(t, s, a)
	wantBinding(t, s, b)
	wantChannels(t, s, "room-a", "ch_1", "ch_2")
	wantChannels(t, s, "room-c")
}

// CappedBindingFactory returns a new, empty BindingStore of at most
// capacity bindings. It registers its own cleanup with t.Cleanup.
type CappedBindingFactory func(t *testing.T, capacity int) state.BindingStore

// TestBindingCap runs the cap part of the BindingStore contract against
// stores made by newStore with a small cap: Bind of a new channel beyond
// it fails with code connector_channel_unavailable and stores nothing,
// also when Binds race for the last places, while a rebind of a bound
// channel and a Bind after an Unbind still succeed (W6; every map keyed
// by remote input is bounded).
func TestBindingCap(t *testing.T, newStore CappedBindingFactory) {
	t.Run("W6_CapRefusesNewChannel", func(t *testing.T) {
		ctx := context.Background()
		s := newStore(t, 2)
		mustBind(t, s, sampleBinding("ch_1", "k"))
		mustBind(t, s, sampleBinding("ch_2", "k"))
		var e *imv2.Error
		if _, err := s.Bind(ctx, sampleBinding("ch_3", "k")); !errors.As(err, &e) || e.Code != imv2.CodeChannelUnavailable {
			t.Fatalf("Bind beyond the cap = %v; want code %s", err, imv2.CodeChannelUnavailable)
		}
		if _, ok, err := s.Binding(ctx, "ch_3"); ok || err != nil {
			t.Fatalf("Binding(ch_3) after a refused Bind = %v, %v; want nothing", ok, err)
		}
		wantChannels(t, s, "k", "ch_1", "ch_2")
		mustBind(t, s, sampleBinding("ch_2", "k2")) // a rebind is no new channel
		wantChannels(t, s, "k2", "ch_2")
		if ch, err := s.Unbind(ctx, "ch_1"); !ch.Had || err != nil {
			t.Fatalf("Unbind(ch_1) = %+v, %v", ch, err)
		}
		mustBind(t, s, sampleBinding("ch_3", "k"))
		wantChannels(t, s, "k", "ch_3")
	})
	// 16 Binds of new channels race for 4 places: exactly 4 succeed (a
	// cap counted apart from the write, or blind to the writes it shares
	// a transaction with, lets them all in).
	t.Run("W6_ConcurrentBindsKeepTheCap", func(t *testing.T) {
		const racers, capacity = 16, 4
		s := newStore(t, capacity)
		var (
			mu  sync.Mutex
			won []string
		)
		together(racers, func(i int) {
			ch := fmt.Sprintf("ch_%02d", i)
			_, err := s.Bind(context.Background(), sampleBinding(ch, "k"))
			if err != nil && !errors.Is(err, &imv2.Error{Code: imv2.CodeChannelUnavailable}) {
				t.Errorf("Bind(%s): %v", ch, err)
				return
			}
			if err == nil {
				mu.Lock()
				won = append(won, ch)
				mu.Unlock()
			}
		})
		if len(won) != capacity {
			t.Fatalf("%d of %d racing Binds for %d places succeeded", len(won), racers, capacity)
		}
		slices.Sort(won)
		wantChannels(t, s, "k", won...)
	})
}
