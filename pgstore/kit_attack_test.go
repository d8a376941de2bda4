package pgstore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// TestAttack_FinalsFloodKeepsAnotherConnectorsInboundRecord (issue 26,
// attack 2, the kit's side on pgstore): the kit records each inbound
// event it handed over in the completed table, under its channel, so a
// replay of the event is skipped. Over real connections, with a table of
// 16 records: xAgent A's channel gets event E; xAgent B (another
// connector_id) sends 40 finals; A's record of E is still there and E
// replayed reaches A no second time. Before schema 6 the flood evicted
// the record (oldest first).
func TestAttack_FinalsFloodKeepsAnotherConnectorsInboundRecord(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, srv.NewDatabase(t), pgstore.Options{CompletedCap: 16})
	plat := &kitPlatform{shown: map[string][]string{}}
	k, err := connector.New(kitCard(), plat, &connector.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- k.Serve(ctx, ln) }()
	t.Cleanup(func() {
		_ = k.Close()
		<-served
	})
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	dial := func(room string) (*kitAgent, *dataplane.Client, string) {
		a := &kitAgent{users: map[string]int{}, outcome: make(chan *imv2.Error, 64)}
		c, err := dataplane.Dial(dctx, dataplane.ClientConfig{
			URL: "http://" + ln.Addr().String(), Target: a,
			Options: &imv2.Options{
				OnDelivered: func(string, imv2.ChatMessage, imv2.AckStatus) { a.outcome <- nil },
				OnFailed:    func(_ string, _ imv2.ChatMessage, err *imv2.Error) { a.outcome <- err },
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		ch, err := c.OpenChannel(dctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Bind(ctx, state.Binding{ChannelID: ch, Key: room, Target: protocol.DescriptorTarget{DisplayName: room}}); err != nil {
			t.Fatal(err)
		}
		return a, c, ch
	}
	victim, _, chA := dial("room-a")
	attacker, xb, chB := dial("room-b")

	ev := connector.InboundEvent{Conversation: "room-a", EventID: "update-1", Text: "hello"}
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	if err := k.Receive(ctx, ev); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return victim.count(id) == 1 })
	for range 40 {
		if _, err := xb.Send(ctx, chB, imv2.ChatMessage{Text: "flood"}); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-attacker.outcome:
			if e != nil {
				t.Fatalf("a flood final failed: %v", e)
			}
		case <-dctx.Done():
			t.Fatal("no ack of a flood final")
		}
	}
	if _, kept, err := st.Lookup(ctx, chA, id); err != nil || !kept {
		t.Fatalf("A's record of E after B's flood: found=%v, %v", kept, err)
	}
	if err := k.Receive(ctx, ev); err != nil {
		t.Fatalf("the replay: %v", err)
	}
	next := connector.InboundEvent{Conversation: "room-a", EventID: "update-2", Text: "after"}
	if err := k.Receive(ctx, next); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return victim.count(connector.EventMessageID(next.Conversation, next.EventID)) == 1 })
	if n := victim.count(id); n != 1 {
		t.Fatalf("the replayed event reached xAgent %d times; want once", n)
	}
}
