package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2/state"
)

// The contract of a state.BindingUpdater: an Update is one step of
// the store, its read and its write together.

// bindingUpdate: Update stores what f leaves and returns the binding as
// it was; an unbound channel is not found and f is not called; an error
// from f, a changed key, channel ID or creation time, or a binding
// CheckBinding refuses stores nothing.
func bindingUpdate(t *testing.T, u updater) {
	ctx := context.Background()
	_, found, err := u.Update(ctx, "ch_none", func(*state.Binding) error {
		t.Error("f called for a channel without a binding")
		return nil
	})
	if err != nil || found {
		t.Fatalf("Update of an unbound channel = found %v, %v; want not found, no error", found, err)
	}

	was := sampleBinding("ch_1", "room")
	mustBind(t, u, was)
	want := was
	want.State, want.Data, want.Target.DisplayName = state.BindingExpired, []byte("refreshed\x00"), "Renamed"
	want.Drafts = want.Drafts[:1]
	old, found, err := u.Update(ctx, "ch_1", func(b *state.Binding) error {
		if !sameBinding(*b, was) {
			t.Errorf("f got %+v; want the stored %+v", *b, was)
		}
		b.State, b.Data, b.Target.DisplayName, b.Drafts = want.State, want.Data, want.Target.DisplayName, b.Drafts[:1]
		return nil
	})
	if err != nil || !found || !sameBinding(old, was) {
		t.Fatalf("Update = %+v, found %v, %v; want the old binding %+v", old, found, err, was)
	}
	wantBinding(t, u, want)
	wantChannels(t, u, "room", "ch_1")

	refused := errors.New("the platform refuses")
	for name, f := range map[string]func(*state.Binding) error{
		"f's error":      func(b *state.Binding) error { b.State = state.BindingRevoked; return refused },
		"a changed key":  func(b *state.Binding) error { b.Key = "elsewhere"; return nil },
		"a changed ID":   func(b *state.Binding) error { b.ChannelID = "ch_2"; return nil },
		"a new Created":  func(b *state.Binding) error { b.Created = b.Created.Add(time.Hour); return nil },
		"too much Data":  func(b *state.Binding) error { b.Data = make([]byte, state.MaxBindingData+1); return nil },
		"a bad state":    func(b *state.Binding) error { b.State = "maybe"; return nil },
		"a draft no one": func(b *state.Binding) error { b.Drafts = []state.DraftHandle{{MessageID: "m"}}; return nil },
	} {
		_, _, err := u.Update(ctx, "ch_1", f)
		if err == nil {
			t.Errorf("Update with %s stored it; want an error", name)
		}
		if name == "f's error" && !errors.Is(err, refused) {
			t.Errorf("Update with f's error returned %v; want f's error", err)
		}
		wantBinding(t, u, want)
	}
	wantChannels(t, u, "room", "ch_1")
	wantChannels(t, u, "elsewhere")
	if _, ok, _ := u.Binding(ctx, "ch_2"); ok {
		t.Error("an Update that changed the channel ID bound that channel")
	}
}

// bindingUpdateConcurrent: Updates racing on one binding each count one
// in its Data, and none is lost. f yields while it holds the binding it
// read, so a store that reads and then writes in two steps loses counts
// here.
func bindingUpdateConcurrent(t *testing.T, u updater) {
	const workers, each = 8, 16
	ctx := context.Background()
	b := sampleBinding("ch_1", "room")
	b.Data = []byte("0")
	mustBind(t, u, b)
	together(workers, func(int) {
		for range each {
			_, found, err := u.Update(ctx, "ch_1", func(b *state.Binding) error {
				n, err := strconv.Atoi(string(b.Data))
				if err != nil {
					return err
				}
				runtime.Gosched()
				b.Data = []byte(strconv.Itoa(n + 1))
				return nil
			})
			if err != nil || !found {
				t.Errorf("Update = found %v, %v", found, err)
				return
			}
		}
	})
	got, _, err := u.Binding(ctx, "ch_1")
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * each); string(got.Data) != want {
		t.Fatalf("after %s racing Updates the count is %s: updates were lost", want, got.Data)
	}
}

// bindingUpdateAfterUnbind: an Update racing an Unbind of its channel
// never binds the channel again, whichever comes first: the channel ends
// unbound and its key released.
func bindingUpdateAfterUnbind(t *testing.T, u updater) {
	ctx := context.Background()
	var resurrected atomic.Int32
	for round := range 16 {
		ch := fmt.Sprintf("ch_%02d", round)
		mustBind(t, u, sampleBinding(ch, "room"))
		together(4, func(i int) {
			if i == 0 {
				if _, err := u.Unbind(ctx, ch); err != nil {
					t.Error(err)
				}
				return
			}
			if _, _, err := u.Update(ctx, ch, func(b *state.Binding) error {
				runtime.Gosched()
				b.State = state.BindingExpired
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
		if _, ok, err := u.Binding(ctx, ch); err != nil {
			t.Fatal(err)
		} else if ok {
			resurrected.Add(1)
		}
	}
	if n := resurrected.Load(); n > 0 {
		t.Fatalf("%d of 16 unbound channels were bound again by an Update racing their Unbind", n)
	}
	wantChannels(t, u, "room")
}

// updater is a BindingStore that is a BindingUpdater.
type updater interface {
	state.BindingStore
	state.BindingUpdater
}

// updaterSubtests runs the BindingUpdater contract when newStore's
// stores have it.
func updaterSubtests(t *testing.T, newStore BindingFactory) {
	if _, ok := newStore(t).(updater); !ok {
		return
	}
	for name, f := range map[string]func(*testing.T, updater){
		"W6_UpdateInPlace":            bindingUpdate,
		"W6_ConcurrentUpdatesKeepAll": bindingUpdateConcurrent,
		"W6_UpdateNeverUndoesUnbind":  bindingUpdateAfterUnbind,
	} {
		t.Run(name, func(t *testing.T) { f(t, newStore(t).(updater)) })
	}
}
