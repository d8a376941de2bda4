package pgstore_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/pgstore"
)

// TestKit_M9_ReceiveOnAReplicaGoesThroughTheRelay: two kit Connectors on
// one database, each with its pgstore.Relay as Options.Relay; xAgent is
// connected to the first. An event received on the second reaches xAgent
// through the shared pending store, once: replays on either replica are
// skipped.
func TestKit_M9_ReceiveOnAReplicaGoesThroughTheRelay(t *testing.T) {
	ctx := context.Background()
	db := srv.NewDatabase(t)
	rctx, cancel := context.WithCancel(ctx)
	var runs sync.WaitGroup
	defer runs.Wait()
	defer cancel()
	replica := func() (*connector.Connector, *pgstore.Store) {
		st, err := pgstore.Open(ctx, db, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		relay := pgstore.NewRelay(st)
		k, err := connector.New(kitCard(), &kitPlatform{shown: map[string][]string{}}, &connector.Options{
			Store: st, Advanced: connector.Advanced{Relay: relay}, DefaultConversation: func(string) string { return "room-1" },
		})
		if err != nil {
			t.Fatal(err)
		}
		runs.Add(1)
		go func() { defer runs.Done(); _ = relay.Run(rctx) }()
		return k, st
	}
	k1, st := replica()
	defer k1.Close()
	k2, _ := replica()
	defer k2.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k1.Serve(rctx, ln) }()
	defer func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	defer cancel()

	a := &kitAgent{users: map[string]int{}}
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	defer dcancel()
	c, err := dataplane.Dial(dctx, dataplane.ClientConfig{URL: "http://" + ln.Addr().String(), Target: a})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.OpenChannel(dctx, "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return k1.Server().IsOpen(ch) })

	ev := connector.InboundEvent{Conversation: "room-1", EventID: "update-1", Text: "hello, received on the other replica"}
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	if err := k2.Receive(ctx, ev); err != nil {
		t.Fatalf("Receive on the replica without the channel: %v", err)
	}
	eventually(t, func() bool { return a.count(id) == 1 && pendingEmpty(t, st, ch) })
	for i, k := range []*connector.Connector{k2, k1} {
		if err := k.Receive(ctx, ev); err != nil {
			t.Fatalf("a replay on replica %d: %v", 2-i, err)
		}
	}
	next := connector.InboundEvent{Conversation: "room-1", EventID: "update-2", Text: "next"}
	if err := k2.Receive(ctx, next); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return a.count(connector.EventMessageID("room-1", "update-2")) == 1 })
	if n := a.count(id); n != 1 {
		t.Fatalf("xAgent got the event %d times; want once", n)
	}
}
