package connector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// status asks for the channel's Descriptor and returns its status.
func (x *pipeXAgent) status(channelID string) string {
	x.t.Helper()
	ans := x.call(protocol.TypeDescriptorGet, channelID, struct{}{})
	var d protocol.DescriptorPayload
	if ans.Type != protocol.TypeDescriptorGetAck || ans.DecodePayload(&d) != nil || d.ConnectionDescriptor == nil {
		x.t.Fatalf("descriptor.get answered %s %+v", ans.Type, ans.Error)
	}
	return d.ConnectionDescriptor.Connection.Status
}

// TestKit_W7_DefaultConversationUnbindLastsUntilNextOpen: with a Card
// without sign-in flows, a channel the Server issues is bound to its
// default conversation (its channel.open ack says connected); an
// explicit Unbind then lasts until the channel's next open: the pushed
// and the asked Descriptor say created, finals are refused, and no
// lookup binds it; a reopen (within the grace, or after a restart on the
// same store) binds the default conversation again.
func TestKit_W7_DefaultConversationUnbindLastsUntilNextOpen(t *testing.T) {
	data := newMemoryStore(fakeclock.New(time.Unix(0, 0)))
	k, _ := newUnit(t, &editor{}, false, Options{Store: data})
	ctx := context.Background()
	x := connectPipe(t, k)
	ch, status := x.open("")
	if status != protocol.StatusConnected {
		t.Fatalf("a new channel is %q; want connected", status)
	}
	if b, ok, err := data.Binding(ctx, ch); err != nil || !ok || b.Key != DefaultConversationKey {
		t.Fatalf("binding of the new channel = %+v, %v, %v; want the default conversation", b, ok, err)
	}
	unbind := func(x *pipeXAgent) {
		t.Helper()
		if err := k.Unbind(ctx, ch); err != nil { // pushes the Descriptor
			t.Fatal(err)
		}
		if s := x.status(ch); s != protocol.StatusCreated {
			t.Fatalf("after Unbind and its push the channel is %q; want created", s)
		}
		if _, err := k.conversation(ctx, ch); !errors.Is(err, ErrNotBound) || imv2.SafeToRetry(err) {
			t.Fatalf("a final after Unbind: %v; want a permanent ErrNotBound", err)
		}
		if _, ok, _ := data.Binding(ctx, ch); ok {
			t.Fatal("a push or lookup bound the channel again")
		}
	}
	unbind(x)
	x.close()
	connID := x.connID
	x = connectPipe(t, k)
	x.connID = connID // resumes within the grace
	if got, s := x.open(ch); got != ch || s != protocol.StatusConnected {
		t.Fatalf("reopen: %s %s; want %s connected", got, s, ch)
	}
	unbind(x)
	x.close()
	k.Close()

	k2, _ := newUnit(t, &editor{}, false, Options{Store: data})
	x = connectPipe(t, k2)
	if got, s := x.open(ch); got != ch || s != protocol.StatusConnected {
		t.Fatalf("reopen after a restart: %s %s; want %s connected", got, s, ch)
	}
	if b, ok, err := data.Binding(ctx, ch); err != nil || !ok || b.Key != DefaultConversationKey {
		t.Fatalf("binding after the reopen = %+v, %v, %v; want the default conversation", b, ok, err)
	}
}

// refusingBinds is the kit's store with bindings refused.
type refusingBinds struct{ *memoryStore }

func (refusingBinds) Bind(context.Context, state.Binding) (state.BindingChange, error) {
	return state.BindingChange{}, imv2.Errorf(imv2.CodeChannelUnavailable, "bindings full")
}

// TestKit_W7_DefaultBindingRefusedRefusesTheOpen: when the default
// binding of a new channel cannot be stored, its channel.open is refused
// with the store's error, never answered with an unbound channel of a
// Card that has no sign-in to bind it.
func TestKit_W7_DefaultBindingRefusedRefusesTheOpen(t *testing.T) {
	k2, err := New(unitCard(false), &editor{}, &Options{Store: refusingBinds{newMemoryStore(fakeclock.New(time.Unix(0, 0)))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k2.Close() })
	x := connectPipe(t, k2)
	if ans := x.call(protocol.TypeConnectorHello, "", protocol.ConnectorHello{ConnectorCardID: "im.unit",
		ProtocolVersion: protocol.ProtocolVersion, SupportedProfiles: []string{imv2.ProfileIMv2}}); ans.Type != protocol.TypeConnectorHelloAck {
		t.Fatalf("hello answered %s", ans.Type)
	}
	ans := x.call(protocol.TypeChannelOpen, "", nil)
	if ans.Type != imv2.TypeError || ans.Error == nil || ans.Error.Code != imv2.CodeChannelUnavailable {
		t.Fatalf("channel.open with bindings refused = %s %+v; want error %s", ans.Type, ans.Error, imv2.CodeChannelUnavailable)
	}
}
