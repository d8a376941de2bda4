package connector

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// TestKit_W7_UpdateBindingKeepsDataAndPushesOnlyOnChange: UpdateBinding
// stores what f leaves (Data, Drafts, State, Target); it reports a
// Descriptor change only for State or Target; it refuses an unbound
// channel (ErrNotBound), a changed channel ID or key, an error of f and a
// binding beyond the bounds, storing nothing in each case.
func TestKit_W7_UpdateBindingKeepsDataAndPushesOnlyOnChange(t *testing.T) {
	k, _ := newUnit(t, &editor{}, true, Options{})
	ctx := context.Background()
	if err := k.UpdateBinding(ctx, "ch_1", func(*state.Binding) error { return nil }); !errors.Is(err, ErrNotBound) {
		t.Fatalf("UpdateBinding of an unbound channel = %v; want ErrNotBound", err)
	}
	if err := k.Bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room", Data: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	stored := func() state.Binding {
		t.Helper()
		b, ok, err := k.store.Binding(ctx, "ch_1")
		if err != nil || !ok {
			t.Fatalf("Binding = %v, %v", ok, err)
		}
		return b
	}
	for _, c := range []struct {
		name    string
		f       func(*state.Binding) error
		changed bool
		data    string
	}{
		{"data", func(b *state.Binding) error {
			b.Data = append(b.Data, "+v2"...)
			b.Drafts = []state.DraftHandle{{MessageID: "m1", Handle: "$1"}}
			return nil
		}, false, "v1+v2"},
		{"target", func(b *state.Binding) error { b.Target.DisplayName = "Room"; return nil }, true, "v1+v2"},
		{"state", func(b *state.Binding) error { b.State = state.BindingExpired; return nil }, true, "v1+v2"},
		{"same state", func(b *state.Binding) error { b.State = state.BindingExpired; return nil }, false, "v1+v2"},
	} {
		changed, err := k.update(ctx, "ch_1", c.f)
		if err != nil || changed != c.changed {
			t.Fatalf("%s: update = %v, %v; want changed %v", c.name, changed, err, c.changed)
		}
		if b := stored(); string(b.Data) != c.data || len(b.Drafts) != 1 {
			t.Fatalf("%s: stored %q with %d drafts; want %q with 1", c.name, b.Data, len(b.Drafts), c.data)
		}
	}
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		f    func(*state.Binding) error
		want func(error) bool
	}{
		{"key changed", func(b *state.Binding) error { b.Key = "other"; b.Data = nil; return nil }, func(err error) bool { return err != nil }},
		{"channel changed", func(b *state.Binding) error { b.ChannelID = "ch_2"; b.Data = nil; return nil }, func(err error) bool { return err != nil }},
		{"f fails", func(b *state.Binding) error { b.Data = nil; return boom }, func(err error) bool { return errors.Is(err, boom) }},
		{"too much data", func(b *state.Binding) error { b.Data = make([]byte, state.MaxBindingData+1); return nil }, func(err error) bool {
			var e *imv2.Error
			return errors.As(err, &e) && e.Code == imv2.CodeInvalidPacket
		}},
	} {
		if err := k.UpdateBinding(ctx, "ch_1", c.f); !c.want(err) {
			t.Fatalf("%s: UpdateBinding = %v", c.name, err)
		}
		if b := stored(); string(b.Data) != "v1+v2" || b.Key != "room" {
			t.Fatalf("%s: stored %q under %q; want it unchanged", c.name, b.Data, b.Key)
		}
	}
	if _, ok, _ := k.store.Binding(ctx, "ch_2"); ok {
		t.Fatal("a refused UpdateBinding bound ch_2")
	}
}

// TestKit_W7_RevokeRefusesFinalsAndInbound: a revoked binding's Descriptor
// says revoked, its finals are refused for good and inbound events of its
// conversation no longer reach it.
func TestKit_W7_RevokeRefusesFinalsAndInbound(t *testing.T) {
	k, _ := newUnit(t, &editor{}, true, Options{})
	ctx := context.Background()
	if err := k.Revoke(ctx, "ch_1"); !errors.Is(err, ErrNotBound) {
		t.Fatalf("Revoke of an unbound channel = %v; want ErrNotBound", err)
	}
	if err := k.Bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room"}); err != nil {
		t.Fatal(err)
	}
	if err := k.Revoke(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	if s := k.describe(ctx, "ch_1").Status; s != protocol.StatusRevoked {
		t.Fatalf("revoked channel is %q; want revoked", s)
	}
	if _, err := k.conversation(ctx, "ch_1"); err == nil || imv2.SafeToRetry(err) {
		t.Fatalf("a final to a revoked binding: %v; want a permanent refusal", err)
	}
	if err := k.Receive(ctx, InboundEvent{Conversation: "room", EventID: "1", Text: "x"}); !errors.Is(err, ErrNotBound) {
		t.Fatalf("Receive for a revoked conversation = %v; want ErrNotBound", err)
	}
}

// TestKit_UpdateBindingSerialised: concurrent UpdateBindings of one
// channel, interleaved with Expire, lose no update (each appends to Data
// under the kit's channel lock; a lost read-modify-write shows as a short
// count).
func TestKit_UpdateBindingSerialised(t *testing.T) {
	k, _ := newUnit(t, &editor{}, true, Options{})
	ctx := context.Background()
	if err := k.Bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room"}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := k.UpdateBinding(ctx, "ch_1", func(b *state.Binding) error {
				c, _ := strconv.Atoi(string(b.Data))
				b.Data = []byte(strconv.Itoa(c + 1))
				return nil
			}); err != nil {
				t.Error(err)
			}
			if i%10 == 0 {
				if err := k.Expire(ctx, "ch_1"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	b, _, err := k.store.Binding(ctx, "ch_1")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b.Data); got != fmt.Sprint(n) {
		t.Fatalf("Data after %d increments = %q", n, got)
	}
}

// TestKit_W6_UpdateBindingAcrossReplicas: two Connectors sharing one Store
// (replicas) are not ordered by each other's locks, so the Store's Update
// must order them: racing UpdateBindings on both lose no change, and an
// UpdateBinding racing an Unbind on the other never binds the channel
// again. Reading and then binding, as UpdateBinding did, loses both.
func TestKit_W6_UpdateBindingAcrossReplicas(t *testing.T) {
	shared := newMemoryStore(nil)
	var ks [2]*Connector
	for i := range ks {
		k, err := New(unitCard(true), &editor{}, &Options{Store: shared})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		ks[i] = k
	}
	ctx := context.Background()
	count := func(b *state.Binding) error {
		c, err := strconv.Atoi(string(b.Data))
		if err != nil {
			return err
		}
		runtime.Gosched() // between the read and the write: where a replica comes in
		b.Data = []byte(strconv.Itoa(c + 1))
		return nil
	}
	if err := ks[0].Bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room", Data: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	const n = 100
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := ks[i%2].UpdateBinding(ctx, "ch_1", count); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if b, _, _ := shared.Binding(ctx, "ch_1"); string(b.Data) != fmt.Sprint(n) {
		t.Fatalf("Data after %d increments on two replicas = %q", n, b.Data)
	}

	for round := range 20 {
		ch := fmt.Sprintf("ch_%d", round+2)
		if err := ks[0].Bind(ctx, state.Binding{ChannelID: ch, Key: "room", Data: []byte("0")}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := ks[1].Unbind(ctx, ch); err != nil {
				t.Error(err)
			}
		})
		for range 3 {
			wg.Go(func() {
				if err := ks[0].UpdateBinding(ctx, ch, count); err != nil && !errors.Is(err, ErrNotBound) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if _, ok, _ := shared.Binding(ctx, ch); ok {
			t.Fatalf("round %d: %s unbound on one replica was bound again by an UpdateBinding on the other", round, ch)
		}
	}
}

// TestKit_W6_UpdateBindingFMayUseTheKit: f runs outside the store's locks,
// so it may read a binding or hand an event to Receive (a Listener that
// moves its cursor only once the batch is handed over). Running f inside
// the store's Update deadlocked on both (found in review).
func TestKit_W6_UpdateBindingFMayUseTheKit(t *testing.T) {
	for name, inF := range map[string]func(k *Connector) error{
		"Binding": func(k *Connector) error { _, _, err := k.Binding(context.Background(), "ch_2"); return err },
		"Receive": func(k *Connector) error {
			_ = k.Receive(context.Background(), InboundEvent{Conversation: "hall", EventID: "e1", Text: "hi"})
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			k, err := New(unitCard(true), &editor{}, &Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := k.Bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room"}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- k.UpdateBinding(ctx, "ch_1", func(b *state.Binding) error {
					if err := inF(k); err != nil {
						return err
					}
					b.Data = []byte("cursor 7")
					return nil
				})
			}()
			select {
			case err := <-done:
				k.Close() // not after a deadlock: it would wait for it
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second): // a deadlock guard
				t.Fatalf("UpdateBinding whose f calls Connector.%s deadlocked", name)
			}
		})
	}
}

// meddler is a Store on which another replica changes the binding right
// before each of the first Updates: what the kit read is stale by then.
type meddler struct {
	*memoryStore
	before func(n int) // called before the nth Update (from 1)
	n      int
}

func (m *meddler) Update(ctx context.Context, channelID string, f func(*state.Binding) error) (state.Binding, bool, error) {
	m.n++
	m.before(m.n)
	return m.memoryStore.Update(ctx, channelID, f)
}

// TestKit_W6_UpdateBindingComparesAndSwaps: a change another replica makes
// between UpdateBinding's read and its write is not written over: f runs
// again on it; a binding removed meanwhile is ErrNotBound, not a silent
// success.
func TestKit_W6_UpdateBindingComparesAndSwaps(t *testing.T) {
	ctx := context.Background()
	store := &meddler{memoryStore: newMemoryStore(nil)}
	k, err := New(unitCard(true), &editor{}, &Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.Bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room", Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	store.before = func(n int) {
		if n == 1 { // the other replica appends b first
			b, _, _ := store.memoryStore.Binding(ctx, "ch_1")
			b.Data = append(b.Data, 'b')
			_, _ = store.memoryStore.Bind(ctx, b)
		}
	}
	calls := 0
	if err := k.UpdateBinding(ctx, "ch_1", func(b *state.Binding) error {
		calls++
		b.Data = append(b.Data, 'c')
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := store.Binding(ctx, "ch_1"); string(b.Data) != "abc" || calls != 2 {
		t.Fatalf("Data %q after f ran %d times; want abc after 2 (the other replica's b kept)", b.Data, calls)
	}

	store.n, store.before = 0, func(n int) {
		if n == 1 {
			_, _ = store.memoryStore.Unbind(ctx, "ch_1")
		}
	}
	err = k.UpdateBinding(ctx, "ch_1", func(b *state.Binding) error { b.Data = []byte("late"); return nil })
	if !errors.Is(err, ErrNotBound) {
		t.Fatalf("UpdateBinding of a binding unbound meanwhile = %v; want ErrNotBound", err)
	}
	if _, ok, _ := store.Binding(ctx, "ch_1"); ok {
		t.Fatal("the unbound channel was bound again")
	}
}
