package connector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/state"
)

// unbindFailing is the kit's store with every Unbind failing.
type unbindFailing struct{ *memoryStore }

func (unbindFailing) Unbind(context.Context, string) (state.BindingChange, error) {
	return state.BindingChange{}, errors.New("store down")
}

// TestKit_W5_DroppedChannelStopsListenerWhenUnbindFails: a channel dropped
// at the end of its grace stops its Listener even when the drop's unbind
// fails (the binding stays for the next drop), so no Listener reads for a
// channel that is gone until Close.
func TestKit_W5_DroppedChannelStopsListenerWhenUnbindFails(t *testing.T) {
	l := newListener()
	k, clock := newUnit(t, l, true, Options{Store: unbindFailing{newMemoryStore(fakeclock.New(time.Unix(0, 0)))}})
	x := connectPipe(t, k)
	ch, _ := x.open("")
	if err := k.Bind(context.Background(), state.Binding{ChannelID: ch, Key: "room"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.calls:
	case <-time.After(deadlockGuard):
		t.Fatal("bound and open, but no Listen runs")
	}
	x.close()
	clock.Advance(dataplane.DefaultOfflineGrace)
	select {
	case err := <-l.ends:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Listen ended with %v; want its context cancelled", err)
		}
	case <-time.After(deadlockGuard):
		t.Errorf("channel %s dropped, its Listener still runs", ch)
	}
}
