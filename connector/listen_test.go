package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/state"
)

// listener is an editor whose Listen reports each call and then does what
// the test queued: an error to return, or nil to block until its context
// ends.
type listener struct {
	*editor
	calls chan state.Binding
	ends  chan error // ctx.Err() of each call that blocked

	mu      sync.Mutex
	results []error
	running int
	most    int
}

func newListener(results ...error) *listener {
	return &listener{editor: &editor{}, calls: make(chan state.Binding, 16), ends: make(chan error, 16), results: results}
}

func (l *listener) Listen(ctx context.Context, b state.Binding, _ Inbox) error {
	l.mu.Lock()
	l.running++
	l.most = max(l.most, l.running)
	var res error
	if len(l.results) > 0 {
		res, l.results = l.results[0], l.results[1:]
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running--
		l.mu.Unlock()
	}()
	l.calls <- b
	if res != nil {
		return res
	}
	<-ctx.Done()
	l.ends <- ctx.Err()
	return ctx.Err()
}

// waitTimers blocks until the clock holds n live timers: the reader has
// gone to sleep on its backoff.
func waitTimers(t *testing.T, c *fakeclock.Clock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within) // a hang guard, not a measured time
	defer cancel()
	if err := c.BlockUntil(ctx, n); err != nil {
		t.Fatalf("%d timers pending; want %d", c.Pending(), n)
	}
}

const within = 10 * time.Second

// TestListen_RestartsAfterCappedBackoff: a failing Listen is called again
// after 1 s, 2 s, 4 s … on the kit's clock, never before, capped at
// ListenBackoffMax, each time with the binding read afresh.
func TestListen_RestartsAfterCappedBackoff(t *testing.T) {
	boom := errors.New("socket closed")
	var fails []error
	for range 7 {
		fails = append(fails, boom)
	}
	l := newListener(fails...)
	k, clock := newUnit(t, l, false, Options{})
	base := clock.Pending()
	k.listen("ch_1")
	if b := testwait.Recv(t, l.calls, within); b.Key != DefaultConversationKey {
		t.Fatalf("Listen got %+v; want the default binding", b)
	}
	for _, d := range []time.Duration{1, 2, 4, 8, 16, 30, 30} {
		d *= time.Second
		waitTimers(t, clock, base+1)
		clock.Advance(d - time.Millisecond)
		if clock.Pending() != base+1 {
			t.Fatalf("the backoff timer fired before %v", d)
		}
		clock.Advance(time.Millisecond)
		testwait.Recv(t, l.calls, within)
	}
	k.Close() // the 8th call blocks until the Connector closes
	if err := testwait.Recv(t, l.ends, within); !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen ended with %v; want its context cancelled by Close", err)
	}
}

// TestListen_OnePerChannelStoppedWithItsBinding: listening twice runs one
// Listen; Unbind ends it; Expire ends it and a reader does not start for
// an expired binding; a new binding gets a new reader only after the old
// one returned; Close ends the last.
func TestListen_OnePerChannelStoppedWithItsBinding(t *testing.T) {
	l := newListener()
	k, _ := newUnit(t, l, false, Options{})
	ctx := context.Background()
	k.listen("ch_1")
	k.listen("ch_1")
	testwait.Recv(t, l.calls, within)
	if err := k.Unbind(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, l.ends, within); !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen ended with %v; want its context cancelled", err)
	}

	// The default binding is made once, at the channel's creation: bind
	// again explicitly.
	if err := k.Bind(ctx, state.Binding{ChannelID: "ch_1", Key: DefaultConversationKey}); err != nil {
		t.Fatal(err)
	}
	k.listen("ch_1")
	testwait.Recv(t, l.calls, within)
	if err := k.Expire(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, l.ends, within)
	k.listen("ch_1")
	k.Close() // waits for every reader
	select {
	case b := <-l.calls:
		t.Fatalf("Listen ran for an expired binding: %+v", b)
	default:
	}

	l2 := newListener()
	k2, _ := newUnit(t, l2, false, Options{})
	k2.listen("ch_2")
	testwait.Recv(t, l2.calls, within)
	k2.stopListening("ch_2")
	k2.listen("ch_2") // waits for the first to return
	testwait.Recv(t, l2.ends, within)
	testwait.Recv(t, l2.calls, within)
	k2.Close()
	testwait.Recv(t, l2.ends, within)
	l2.mu.Lock()
	defer l2.mu.Unlock()
	if l2.most != 1 {
		t.Fatalf("%d Listens ran at once for one channel; want 1", l2.most)
	}
}

// TestListen_GoneErrorsEndTheBinding: a Listener that returns
// ErrBindingExpired (ErrBindingRevoked, wrapped) turns the binding expired
// (revoked) and is not restarted.
func TestListen_GoneErrorsEndTheBinding(t *testing.T) {
	for _, c := range []struct {
		err  error
		want state.BindingState
	}{
		{ErrBindingExpired, state.BindingExpired},
		{fmt.Errorf("bot kicked: %w", ErrBindingRevoked), state.BindingRevoked},
	} {
		l := newListener(c.err)
		k, clock := newUnit(t, l, false, Options{})
		k.listen("ch_1")
		testwait.Recv(t, l.calls, within)
		k.readWG.Wait()
		b, ok, err := k.store.Binding(context.Background(), "ch_1")
		if err != nil || !ok || b.State != c.want {
			t.Fatalf("binding %+v, %v, %v; want %s", b, ok, err, c.want)
		}
		clock.Advance(time.Hour)
		if clock.Pending() != 0 {
			t.Fatalf("Listen is to restart after it said the binding is %s", c.want)
		}
	}
}

// TestListen_UpdateKeepsTheCursorInData: what a reader saves with Update
// is in the binding the next Listen gets.
func TestListen_UpdateKeepsTheCursorInData(t *testing.T) {
	var calls []string
	p := &cursorListener{editor: &editor{}, seen: &calls}
	k, clock := newUnit(t, p, false, Options{})
	base := clock.Pending()
	k.listen("ch_1")
	waitTimers(t, clock, base+1)
	clock.Advance(ListenBackoffMin)
	k.Close()
	if want := []string{"", "batch-1"}; !slices.Equal(calls, want) {
		t.Fatalf("Listen saw cursors %q; want %q", calls, want)
	}
}

// cursorListener saves "batch-1" and fails, so it is called again.
type cursorListener struct {
	*editor
	seen *[]string
}

func (p *cursorListener) Listen(ctx context.Context, b state.Binding, in Inbox) error {
	*p.seen = append(*p.seen, string(b.Data))
	if len(*p.seen) > 1 {
		<-ctx.Done()
		return nil
	}
	if err := in.Update(ctx, func(b *state.Binding) error { b.Data = []byte("batch-1"); return nil }); err != nil {
		return err
	}
	return errors.New("connection reset")
}

// inboxKeeper hands out its Inbox and waits for its context.
type inboxKeeper struct {
	*editor
	inboxes chan Inbox
}

func (p inboxKeeper) Listen(ctx context.Context, _ state.Binding, in Inbox) error {
	p.inboxes <- in
	<-ctx.Done()
	return nil
}

// TestListen_StaleReaderWritesNothing: once a new binding replaced the one
// a reader started with, that reader's Update fails and leaves the new
// binding's Data as it is.
func TestListen_StaleReaderWritesNothing(t *testing.T) {
	p := inboxKeeper{&editor{}, make(chan Inbox, 2)}
	k, _ := newUnit(t, p, false, Options{})
	ctx := context.Background()
	if err := k.bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room", Data: []byte("old token")}); err != nil {
		t.Fatal(err)
	}
	k.listen("ch_1")
	stale := testwait.Recv(t, p.inboxes, within)
	if err := k.bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room", Data: []byte("new token")}); err != nil {
		t.Fatal(err)
	}
	err := stale.Update(ctx, func(b *state.Binding) error { b.Data = []byte("old token, cursor 7"); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a stale reader's Update = %v; want context.Canceled", err)
	}
	if b, _, _ := k.store.Binding(ctx, "ch_1"); string(b.Data) != "new token" {
		t.Fatalf("Data %q after a stale Update; want the new binding's", b.Data)
	}
}

// TestListen_StaleReaderOfAReplicaWritesNothing: a replica sharing the
// store binds the channel again (the same key signed in again, then
// another key); the reader this process started with the old binding is
// not stopped by that, and its Update fails all the same, leaving the
// new binding's Data as it is.
func TestListen_StaleReaderOfAReplicaWritesNothing(t *testing.T) {
	p := inboxKeeper{&editor{}, make(chan Inbox, 2)}
	k, clock := newUnit(t, p, false, Options{})
	other, err := New(unitCard(false), &editor{}, &Options{Store: k.store, Advanced: Advanced{Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx := context.Background()
	if err := k.bind(ctx, state.Binding{ChannelID: "ch_1", Key: "room", Data: []byte("old token")}); err != nil {
		t.Fatal(err)
	}
	k.listen("ch_1")
	stale := testwait.Recv(t, p.inboxes, within)
	for _, again := range []state.Binding{
		{ChannelID: "ch_1", Key: "room", Data: []byte("new token"), Created: clock.Now().Add(time.Minute)},
		{ChannelID: "ch_1", Key: "hall", Data: []byte("new token")},
	} {
		if err := other.Bind(ctx, again); err != nil {
			t.Fatal(err)
		}
		err := stale.Update(ctx, func(b *state.Binding) error { b.Data = []byte("old token, cursor 7"); return nil })
		if !errors.Is(err, errStaleReader) {
			t.Fatalf("a stale reader's Update after a replica bound %s = %v; want errStaleReader", again.Key, err)
		}
		if b, _, _ := k.store.Binding(ctx, "ch_1"); string(b.Data) != "new token" {
			t.Fatalf("Data %q after a stale Update; want the new binding's", b.Data)
		}
	}
}
