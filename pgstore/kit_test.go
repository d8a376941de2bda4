package pgstore_test

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// kitPlatform is a chat service that records the finals it shows.
type kitPlatform struct {
	mu    sync.Mutex
	shown map[string][]string // conversation key → message IDs
}

func (p *kitPlatform) Post(_ context.Context, to connector.Conversation, m *connector.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown[to.Key] = append(p.shown[to.Key], m.MessageID)
	return nil
}

func (p *kitPlatform) finals(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.shown[key])
}

// kitAgent is xAgent: it counts the user messages that reach it and
// reports the outcome of its finals.
type kitAgent struct {
	mu      sync.Mutex
	users   map[string]int
	outcome chan *imv2.Error // nil for accepted
}

func (a *kitAgent) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users[m.MessageID]++
	return nil
}

func (a *kitAgent) count(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.users[id]
}

func kitCard() *protocol.Card {
	return &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "0.0.1", GitTag: "v0.0.1", GitRev: "abc1234", BuildTime: "2612011200"},
		ConnectorCardID: "im.pgkit",
		Connector:       protocol.CardInfo{Name: "pgstore kit test", Version: "0.0.1", Vendor: "Example"},
		Supports: protocol.Supports{
			UserChannelMode: "single",
			TargetTypes:     []string{imv2.TargetTypeIM},
			Targets:         []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "pretend", Label: "Pretend"}},
			Profiles:        []string{imv2.ProfileIMv2},
		},
		Tools: []protocol.Tool{{
			ToolID:      "pretend_message_send",
			Profile:     imv2.ProfileIMv2,
			InputSchema: json.RawMessage(`{"type":"object","required":["connector_channel_id"],"properties":{"connector_channel_id":{"type":"string"}}}`),
		}},
	}
}

// TestKit_M9_S8_ConnectorOnPgstoreAcrossRestart: a kit Connector whose
// Store is pgstore, over a loopback WebSocket to dataplane.Dial: a user
// message goes in through Receive and reaches xAgent once, a final comes
// out to the bound conversation; after the Connector is closed and a new
// one opened on the same database, the binding is still there (events of
// its conversation reach the channel, the next final goes to it), and a
// replayed inbound event is a duplicate: xAgent got it once.
func TestKit_M9_S8_ConnectorOnPgstoreAcrossRestart(t *testing.T) {
	ctx := context.Background()
	db := srv.NewDatabase(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	plat := &kitPlatform{shown: map[string][]string{}}
	type running struct {
		k    *connector.Connector
		st   *pgstore.Store
		done chan error
	}
	start := func(ln net.Listener) running {
		st, err := pgstore.Open(ctx, db, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		k, err := connector.New(kitCard(), plat, &connector.Options{
			Store: st, DefaultConversation: func(string) string { return "room-1" },
		})
		if err != nil {
			t.Fatal(err)
		}
		r := running{k, st, make(chan error, 1)}
		go func() { r.done <- k.Serve(ctx, ln) }()
		return r
	}
	stop := func(r running) {
		if err := r.k.Close(); err != nil {
			t.Error(err)
		}
		if err := <-r.done; err != nil {
			t.Error(err)
		}
		_ = r.st.Close()
	}
	r := start(ln)

	a := &kitAgent{users: map[string]int{}, outcome: make(chan *imv2.Error, 16)}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := dataplane.Dial(dctx, dataplane.ClientConfig{
		URL: "http://" + addr, Target: a,

		Options: &imv2.Options{
			OnDelivered: func(string, imv2.ChatMessage, imv2.AckStatus) { a.outcome <- nil },
			OnFailed:    func(_ string, _ imv2.ChatMessage, err *imv2.Error) { a.outcome <- err },
		},
		Advanced: dataplane.ClientAdvanced{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.OpenChannel(dctx, "")
	if err != nil {
		t.Fatal(err)
	}
	final := func() string {
		t.Helper()
		d, err := c.Send(ctx, ch, imv2.ChatMessage{Text: "an answer"})
		if err != nil {
			t.Fatal(err)
		}
		id := d.MessageID()
		select {
		case e := <-a.outcome:
			if e != nil {
				t.Fatalf("final %s failed: %v", id, e)
			}
		case <-dctx.Done():
			t.Fatal("no ack of the final")
		}
		return id
	}

	// An explicit binding, not the default: after the restart only the
	// database knows the channel belongs to room-9.
	if err := r.k.Bind(ctx, state.Binding{ChannelID: ch, Key: "room-9", Target: protocol.DescriptorTarget{DisplayName: "Room 9"}}); err != nil {
		t.Fatal(err)
	}
	ev := connector.InboundEvent{Conversation: "room-9", EventID: "update-4711", Text: "hello"}
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	if err := r.k.Receive(ctx, ev); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return a.count(id) == 1 })
	f1 := final()
	if got := plat.finals("room-9"); !slices.Equal(got, []string{f1}) {
		t.Fatalf("platform shows %q in room-9; want the final %s", got, f1)
	}
	if b, ok, err := r.st.Binding(ctx, ch); err != nil || !ok || b.Key != "room-9" {
		t.Fatalf("binding in pgstore = %+v, %v, %v; want room-9", b, ok, err)
	}
	eventually(t, func() bool { return pendingEmpty(t, r.st, ch) })
	stop(r)

	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Fatal(err)
	}
	r = start(ln)
	defer stop(r)
	eventually(t, func() bool { return c.Connected() && r.k.Server().IsOpen(ch) })
	if err := r.k.Receive(ctx, ev); err != nil {
		t.Fatalf("a replay after the restart: %v", err)
	}
	eventually(t, func() bool { return pendingEmpty(t, r.st, ch) })
	other := connector.InboundEvent{Conversation: "room-9", EventID: "update-4712", Text: "a new one"}
	if err := r.k.Receive(ctx, other); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return a.count(connector.EventMessageID(other.Conversation, other.EventID)) == 1 })
	if n := a.count(id); n != 1 {
		t.Fatalf("the replayed event reached xAgent %d times; want once", n)
	}
	f2 := final()
	if got := plat.finals("room-9"); !slices.Equal(got, []string{f1, f2}) {
		t.Fatalf("platform shows %q in room-9 after the restart; want %q", got, []string{f1, f2})
	}
}

func pendingEmpty(t *testing.T, st *pgstore.Store, channelID string) bool {
	t.Helper()
	es, err := st.List(context.Background(), channelID)
	if err != nil {
		t.Fatal(err)
	}
	return len(es) == 0
}

// eventually waits for cond, polling: the end-to-end test watches two
// processes' worth of goroutines, which no fake clock drives.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
