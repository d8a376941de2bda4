package imv2

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

// keepingStore is a user's CompletedStore that keeps a value-only view of
// each call's ctx past the call (as a write-behind or tracing wrapper
// does, through context.WithoutCancel or WithValue), with the deadline it
// had during the call.
type keepingStore struct {
	CompletedStore
	mu        sync.Mutex
	kept      []context.Context
	deadlines []time.Time
}

func (k *keepingStore) keep(ctx context.Context) {
	d, _ := ctx.Deadline()
	k.mu.Lock()
	k.kept = append(k.kept, ctx)
	k.deadlines = append(k.deadlines, d)
	k.mu.Unlock()
}

func (k *keepingStore) Lookup(ctx context.Context, ch, id string) (Fingerprint, bool, error) {
	k.keep(ctx)
	return k.CompletedStore.Lookup(ctx, ch, id)
}

func (k *keepingStore) Record(ctx context.Context, ch, id string, fp Fingerprint) error {
	k.keep(ctx)
	return k.CompletedStore.Record(ctx, ch, id, fp)
}

// TestStoreContext_KeptByAUserStoreStaysItsCalls: a user's store may keep
// its ctx after the call returned (Go's context contract allows it); the
// kept context still answers as during its call, after further calls on
// the channel: never a panic on a released parent, never the next call's
// deadline or values (a reused context would give both).
func TestStoreContext_KeptByAUserStoreStaysItsCalls(t *testing.T) {
	st := &keepingStore{CompletedStore: NewMemoryCompletedStore(0, 0, nil)}
	c, w, _ := newConnector(t, newRecTarget(), &Options{Completed: st})
	for i := range 3 {
		if err := c.Receive(context.Background(), finalPacket(t, fmt.Sprintf("msg_%d", i), "hi")); err != nil {
			t.Fatal(err)
		}
		w.next(t) // the ack: Record has returned
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.kept) != 6 {
		t.Fatalf("%d store calls, want 6 (Lookup and Record per message)", len(st.kept))
	}
	for i, k := range st.kept {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("call %d: its kept ctx panics after the call returned: %v", i, r)
				}
			}()
			_ = context.WithoutCancel(k).Value(ctxKey{})
			if d, _ := k.Deadline(); !d.Equal(st.deadlines[i]) {
				t.Errorf("call %d: its kept ctx now has deadline %v, had %v during the call", i, d, st.deadlines[i])
			}
		}()
	}
}

// TestStoreContext_NoneForTheMemoryStores: this package's in-memory
// stores, which never read ctx, get no store context (a call costs no
// clock read and no allocation); a store of the user's, even one wrapping
// a memory store, gets one per call, with the store timeout.
func TestStoreContext_NoneForTheMemoryStores(t *testing.T) {
	c, _, clk := newConnector(t, newRecTarget(), nil)
	for _, tc := range []struct {
		name  string
		store any
		none  bool
	}{
		{"memory completed", NewMemoryCompletedStore(0, 0, nil), true},
		{"memory pending", NewMemoryPendingStore(0), true},
		{"user completed", &keepingStore{CompletedStore: NewMemoryCompletedStore(0, 0, nil)}, false},
		{"user pending", struct{ PendingStore }{NewMemoryPendingStore(0)}, false},
		{"user claims", struct{ ClaimStore }{NewMemoryCompletedStore(0, 0, nil)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sctx := c.storeCtx(tc.store)
			defer sctx.Release()
			if got := sctx == nil; got != tc.none {
				t.Fatalf("no context %v, want %v", got, tc.none)
			}
			d, ok := sctx.Call().Deadline()
			if tc.none {
				if ok || sctx.Call() != context.Background() {
					t.Fatalf("a memory store's call ctx is not context.Background(): deadline %v %v", d, ok)
				}
				return
			}
			if !ok || !d.Equal(clk.Now().Add(storeTimeout)) {
				t.Fatalf("a user store's call has deadline %v %v, want %v on the channel's clock", d, ok, storeTimeout)
			}
		})
	}
}

// timedTarget blocks each PostMessage until its ctx ends and reports that
// ctx; drafts and activity record their ctx's deadline.
type timedTarget struct {
	posting   chan context.Context
	deadlines chan time.Time
}

func (tt *timedTarget) PostMessage(ctx context.Context, _ string, _ *ChatMessage) error {
	done := ctx.Done()
	tt.posting <- ctx
	<-done
	return ctx.Err()
}

func (tt *timedTarget) UpdateDraft(ctx context.Context, _, _, _ string) error {
	d, _ := ctx.Deadline()
	tt.deadlines <- d
	return nil
}

func (tt *timedTarget) SetActivity(ctx context.Context, _ string, _ ChatActivity) error {
	d, _ := ctx.Deadline()
	tt.deadlines <- d
	return nil
}

// TestChannel_A5_TargetTimeoutFollowsTheClock: TargetTimeout is measured
// on Options.Clock, as its doc says: the post's ctx ends when the fake
// clock reaches the timeout, not a nanosecond before and not by the wall
// clock, and the message is then rejected, never accepted (A5). Drafts
// and activity get the same deadline on that clock.
func TestChannel_A5_TargetTimeoutFollowsTheClock(t *testing.T) {
	const timeout = time.Minute
	tt := &timedTarget{posting: make(chan context.Context, 1), deadlines: make(chan time.Time, 4)}
	c, w, clk := newConnector(t, tt, &Options{TargetTimeout: timeout, ActivityTimeout: time.Hour})

	p := finalPacket(t, "m1", "hello")
	if err := c.Receive(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ctx := recv(t, tt.posting)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(t0.Add(timeout)) {
		t.Fatalf("the post's deadline is %v %v, want %v on the channel's clock", d, ok, t0.Add(timeout))
	}
	clk.Advance(timeout - time.Nanosecond)
	if err := ctx.Err(); err != nil {
		t.Fatalf("the post's ctx ended before the clock reached the timeout: %v", err)
	}
	clk.Advance(time.Nanosecond)
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the clock reached the timeout; the post's ctx has %v", err)
	}
	// A timed-out post is never accepted (A5); it may have been applied
	// (the error contract), so it is not made again either.
	if a := ackOf(t, p, w.next(t)); a.Status != AckRejected || a.Code != CodeDeliveryOutcomeUnknown {
		t.Fatalf("a timed-out post is answered %+v, want rejected, outcome unknown (A5, S8)", a)
	}

	now := clk.Now()
	if err := c.Receive(context.Background(), activityPacket(t, ActivityThinking, "")); err != nil {
		t.Fatal(err)
	}
	if err := c.Receive(context.Background(), deltaPacket(t, "m2", 1, "he")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d := recv(t, tt.deadlines); !d.Equal(now.Add(timeout)) {
			t.Fatalf("a draft or activity call has deadline %v, want %v on the channel's clock", d, now.Add(timeout))
		}
	}
}
