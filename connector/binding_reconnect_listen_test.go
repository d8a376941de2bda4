package connector

import (
	"context"
	"errors"
	"testing"
	"time"
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
	if err := k.Bind(ctx, Binding{ChannelID: ch, Key: "room"}); err != nil {
		t.Fatal(err)
	}
	<-l.calls
	if err := k.Expire(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if err := <-l.ends; !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen after Expire ended with %v; want cancelled", err)
	}
	if err := k.UpdateBinding(ctx, ch, func(b *Binding) error { b.State = BindingConnected; b.Data = []byte("new token"); return nil }); err != nil {
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
