package connector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// pipeXAgent is a bare xAgent on an in-memory pipe to a kit's Server.
type pipeXAgent struct {
	t    *testing.T
	c    dataplane.Conn
	done chan struct{}
	// connID is the connector_id of the last hello; open says hello with
	// it, so a new pipe given it resumes.
	connID string
}

func connectPipe(t *testing.T, k *Connector) *pipeXAgent {
	t.Helper()
	a, b := dataplane.NewPipe()
	x := &pipeXAgent{t: t, c: a, done: make(chan struct{})}
	go func() {
		defer close(x.done)
		_ = k.Server().ServeConn(context.Background(), b)
	}()
	t.Cleanup(x.close)
	return x
}

// close ends the connection and waits until the Server let go of it.
func (x *pipeXAgent) close() {
	_ = x.c.Close()
	<-x.done
}

func (x *pipeXAgent) call(typ, channelID string, payload any) *imv2.Packet {
	x.t.Helper()
	req, err := imv2.NewPacket(typ, channelID, payload)
	if err != nil {
		x.t.Fatal(err)
	}
	req.RequestID = "req_" + req.PacketID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := x.c.Write(ctx, req); err != nil {
		x.t.Fatal(err)
	}
	for {
		ans, err := x.c.Read(ctx)
		if err != nil {
			x.t.Fatal(err)
		}
		if ans.ReplyTo == req.PacketID {
			return ans
		}
	}
}

// open says hello (with connID) and opens id ("" for a new channel); it
// returns the channel's ID and its Descriptor's status.
func (x *pipeXAgent) open(id string) (string, string) {
	x.t.Helper()
	ans := x.call(protocol.TypeConnectorHello, "", protocol.ConnectorHello{ConnectorCardID: "im.unit", ConnectorID: x.connID,
		ProtocolVersion: protocol.ProtocolVersion, SupportedProfiles: []string{imv2.ProfileIMv2}})
	var hello protocol.ConnectorHelloAck
	if ans.Type != protocol.TypeConnectorHelloAck || ans.DecodePayload(&hello) != nil {
		x.t.Fatalf("hello answered %s %+v", ans.Type, ans.Error)
	}
	x.connID = hello.ConnectorID
	ans = x.call(protocol.TypeChannelOpen, id, nil)
	var ack protocol.ChannelOpenAck
	if ans.Type != protocol.TypeChannelOpenAck || ans.DecodePayload(&ack) != nil || ack.ConnectionDescriptor == nil {
		x.t.Fatalf("channel.open answered %s %+v", ans.Type, ans.Error)
	}
	return ans.ConnectorChannelID, ack.ConnectionDescriptor.Connection.Status
}

// killedAtForget is the kit's store of a process killed between the
// drop's unbind and the registry's Forget: Forget records what the store
// held at that moment and fails, as if the process died there.
type killedAtForget struct {
	*memoryStore
	at chan forgetSnapshot
}

type forgetSnapshot struct {
	id           string
	bound, known bool
}

func (s killedAtForget) Forget(ctx context.Context, id string) error {
	_, bound, _ := s.memoryStore.Binding(ctx, id)
	known, _ := s.memoryStore.Known(ctx, id)
	select { // the drop tries Forget more than once: the test reads the first
	case s.at <- forgetSnapshot{id, bound, known}:
	default:
	}
	return errors.New("killed")
}

// TestKit_W5_DropUnbindsBeforeTheRegistryForgets: when a channel's grace
// runs out, its binding goes (and its key is released) before the
// registry forgets the channel. A Connector killed between the two leaves
// a registered channel without a binding: restarted on the same store, a
// reopen of the channel finds it (same ID) and its Descriptor created,
// and no binding is left behind for a channel nobody knows.
func TestKit_W5_DropUnbindsBeforeTheRegistryForgets(t *testing.T) {
	data := newMemoryStore(fakeclock.New(time.Unix(0, 0)))
	store := killedAtForget{data, make(chan forgetSnapshot, 1)}
	p := &countingReleaser{released: map[string]int{}}
	k, clock := newUnit(t, p, true, Options{Store: store})
	ctx := context.Background()
	x := connectPipe(t, k)
	ch, _ := x.open("")
	if err := k.Bind(ctx, state.Binding{ChannelID: ch, Key: "room"}); err != nil {
		t.Fatal(err)
	}
	x.close()
	clock.Advance(dataplane.DefaultOfflineGrace)
	var at forgetSnapshot
	select {
	case at = <-store.at:
	case <-time.After(10 * time.Second):
		t.Fatal("the dropped channel never reached Forget")
	}
	if at.id != ch || at.bound || !at.known {
		t.Fatalf("at Forget: %+v; want %s unbound and still registered", at, ch)
	}
	p.mu.Lock()
	released := p.released["room"]
	p.mu.Unlock()
	if released != 1 {
		t.Fatalf("room released %d times before the Forget; want 1", released)
	}
	k.Close()

	// The restart: the same data, a store that works.
	k2, _ := newUnit(t, &editor{}, true, Options{Store: data})
	got, status := connectPipe(t, k2).open(ch)
	if got != ch || status != protocol.StatusCreated {
		t.Fatalf("reopen after the restart: %s %s; want %s created", got, status, ch)
	}
	if _, bound, _ := data.Binding(ctx, ch); bound {
		t.Fatal("a binding outlived the drop")
	}
}
