package connector

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2/state"
)

// TestKit_W7_UpdateToConnectedRestartsListener: a binding turned expired
// stops its Listener, and UpdateBinding turning it connected again (a
// refreshed token) starts Listen again, with the new binding.
func TestKit_W7_UpdateToConnectedRestartsListener(t *testing.T) {
	l := newListener()
	k, _ := newUnit(t, l, true, Options{})
	x := connectPipe(t, k)
	ch, _ := x.open("")
	ctx := context.Background()
	if err := k.Bind(ctx, state.Binding{ChannelID: ch, Key: "room"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.calls:
	case <-time.After(deadlockGuard):
		t.Fatal("bound and open, but no Listen runs")
	}
	if err := k.Expire(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if err := <-l.ends; !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen after Expire ended with %v; want cancelled", err)
	}
	if err := k.UpdateBinding(ctx, ch, func(b *state.Binding) error {
		b.State = state.BindingConnected
		b.Data = []byte("new token")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-l.calls:
		if string(b.Data) != "new token" {
			t.Errorf("Listen restarted with Data %q; want the new token", b.Data)
		}
	case <-time.After(deadlockGuard):
		t.Errorf("binding connected again and channel open, but no Listen runs")
	}
}

// staleFirstRead is a Store whose second Binding read (the channel.open
// reads first for its Descriptor, then its reader reads) waits, after it
// read, until gate closes: the reader then holds what it read before a
// Bind that came meanwhile.
type staleFirstRead struct {
	*memoryStore
	read  chan struct{}
	gate  chan struct{}
	reads atomic.Int32
}

func (s *staleFirstRead) Binding(ctx context.Context, channelID string) (state.Binding, bool, error) {
	b, ok, err := s.memoryStore.Binding(ctx, channelID)
	if s.reads.Add(1) == 2 {
		close(s.read)
		<-s.gate
	}
	return b, ok, err
}

// TestKit_W6_BindWhileTheReaderReadsStartsListen: the reader a channel's
// open starts reads no binding yet; a Bind comes before it ends; Listen
// still runs. The Bind used to find the reader running and leave it to
// it, and the reader ended on what it had read (1 run in ~500 of
// TestKit_W7_UpdateToConnectedRestartsListener hung so).
func TestKit_W6_BindWhileTheReaderReadsStartsListen(t *testing.T) {
	l := newListener()
	store := &staleFirstRead{memoryStore: newMemoryStore(nil), read: make(chan struct{}), gate: make(chan struct{})}
	k, err := New(unitCard(true), l, &Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	x := connectPipe(t, k)
	ch, _ := x.open("")
	select {
	case <-store.read: // the open's reader read: no binding yet
	case <-time.After(deadlockGuard):
		t.Fatal("no reader started on open")
	}
	if err := k.Bind(context.Background(), state.Binding{ChannelID: ch, Key: "room"}); err != nil {
		t.Fatal(err)
	}
	close(store.gate)
	select {
	case <-l.calls:
	case <-time.After(deadlockGuard):
		t.Fatal("bound while the reader read, and no Listen runs")
	}
}
