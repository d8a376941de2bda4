package connector

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

// forgetFailing is the kit's store with the Registry's Forget failing
// (a transient store error that outlasts the drop's tries).
type forgetFailing struct {
	*memoryStore
	calls *atomic.Int32
}

func (s forgetFailing) Forget(context.Context, string) error {
	s.calls.Add(1)
	return errors.New("transient store error")
}

// TestKit_W11_ForgetFailedReopenBindsDefault: a channel of a Card without
// auth flows dropped at the end of its grace is unbound, but when the
// Registry cannot forget its ID (tried more than once), xAgent's reopen of
// that ID (W11) finds it again: the reopen binds the default conversation,
// so its finals are not refused for good with no sign-in to help.
func TestKit_W11_ForgetFailedReopenBindsDefault(t *testing.T) {
	store := forgetFailing{newMemoryStore(fakeclock.New(time.Unix(0, 0))), new(atomic.Int32)}
	k, clock := newUnit(t, &editor{}, false, Options{Store: store})
	x := connectPipe(t, k)
	ch, _ := x.open("")
	x.close()
	clock.Advance(dataplane.DefaultOfflineGrace)
	k.Close() // waits for the drop
	if _, ok, _ := store.Binding(context.Background(), ch); ok {
		t.Fatal("the dropped channel is still bound")
	}
	if n := store.calls.Load(); n < 2 {
		t.Errorf("the drop asked the Registry to forget %d times; want it retried", n)
	}
	k2, _ := newUnit(t, &editor{}, false, Options{Store: store})
	got, st := connectPipe(t, k2).open(ch)
	if got != ch {
		t.Fatalf("reopen got %s; want the registered %s", got, ch)
	}
	if st != protocol.StatusConnected {
		t.Errorf("reopen of the kept ID says %s; want connected", st)
	}
	if _, err := k2.conversation(context.Background(), ch); err != nil {
		t.Errorf("a final after the reopen: %v", err)
	}
}
