package connector_test

import (
	"context"
	"fmt"

	"github.com/xagentkit/imv2"
	kit "github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/sim"
	"github.com/xagentkit/imv2/state"
)

// pretendCard is the Card of the examples' pretend IM service.
func pretendCard() *protocol.Card {
	card, err := protocol.DecodeCard([]byte(`{"schema":"xagent.connector/v1","protocol_version":"3.0","build":{"version":"1.0.0","build_time":"2026-12-01"},"connector_card_id":"im.pretend","connector":{"name":"Pretend","version":"1.0.0"},"supports":{"target_types":["im"],"targets":[{"target_type":"im","provider":"pretend","label":"Pretend"}],"profiles":["xagent.im.v2"]}}`))
	if err != nil {
		panic(err)
	}
	return card
}

// feed is a pretend platform that pushes its events down a Go channel, as
// a websocket or a long poll would; it is a Listener.
type feed struct {
	events chan kit.InboundEvent
	saved  chan string
	shown  chan string
}

func (f feed) Post(_ context.Context, to kit.Conversation, m *kit.Message) error {
	f.shown <- to.Key + ": " + m.Text
	return nil
}

// Listen reads the conversation from the cursor kept in the binding's
// Data, hands each event to the kit, then saves the cursor: a restart
// reads from there, and an event handed twice is a duplicate (its EventID).
func (f feed) Listen(ctx context.Context, b state.Binding, in kit.Inbox) error {
	for {
		select {
		case <-ctx.Done():
			return nil // the binding went, or the Connector closed
		case ev := <-f.events:
			if err := in.Receive(ctx, ev); err != nil {
				return err // logged; Listen is called again after a backoff
			}
			err := in.Update(ctx, func(b *state.Binding) error { b.Data = []byte(ev.EventID); return nil })
			if err != nil {
				return err
			}
			f.saved <- ev.EventID
		}
	}
}

func ExampleListener() {
	f := feed{make(chan kit.InboundEvent, 1), make(chan string, 1), make(chan string, 1)}
	opened := make(chan string, 1)
	k, _ := kit.New(pretendCard(), f, &kit.Options{Advanced: kit.Advanced{OnChannelOpen: func(id string) { opened <- id }}})
	url, _ := k.Start("127.0.0.1:0")
	agent, _ := sim.Start(context.Background(), sim.Config{Connector: url}) // xAgent: echoes
	defer func() { agent.Close(); k.Close() }()
	channelID := <-opened // the kit runs Listen for the channel's binding now
	f.events <- kit.InboundEvent{Conversation: kit.DefaultConversationKey, EventID: "update-7", Text: "hi"}
	fmt.Println(<-f.shown)
	<-f.saved
	b, _, _ := k.Binding(context.Background(), channelID)
	fmt.Printf("cursor: %s\n", b.Data)
	// Output:
	// default: You said: hi
	// cursor: update-7
}

// flaky is a pretend platform whose first post answers 503: the request
// was refused, nothing was shown, so the post is marked imv2.NotPosted
// (not posted) and the kit may make it again. Without the mark the kit could not know whether
// the message is on screen and would not post it twice.
type flaky struct {
	tries *int
	shown chan string
}

func (f flaky) Post(_ context.Context, to kit.Conversation, m *kit.Message) error {
	if *f.tries++; *f.tries == 1 {
		return imv2.NotPosted(fmt.Errorf("503 Service Unavailable"))
	}
	f.shown <- fmt.Sprintf("%s (try %d)", m.Text, *f.tries)
	return nil
}

func Example_notPosted() {
	f := flaky{new(int), make(chan string, 1)}
	k, _ := kit.New(pretendCard(), f, nil)
	url, _ := k.Start("127.0.0.1:0")
	agent, _ := sim.Start(context.Background(), sim.Config{Connector: url})
	defer func() { agent.Close(); k.Close() }()
	_ = k.Receive(context.Background(), kit.InboundEvent{Conversation: kit.DefaultConversationKey, EventID: "update-1", Text: "hi"})
	fmt.Println(<-f.shown)
	// Output:
	// You said: hi (try 2)
}

// quiet is a platform that posts nowhere: the binding examples need none.
type quiet struct{}

func (quiet) Post(context.Context, kit.Conversation, *kit.Message) error { return nil }

// A platform keeps its own state with the binding, in Data: a token it
// refreshed, a sync cursor. The kit stores it with the binding and never
// sends it to xAgent.
func ExampleConnector_UpdateBinding() {
	ctx := context.Background()
	k, _ := kit.New(pretendCard(), quiet{}, nil)
	defer k.Close()
	_ = k.Bind(ctx, state.Binding{ChannelID: "cch_1", Key: "chat-42", Data: []byte(`{"token":"t1"}`)})
	err := k.UpdateBinding(ctx, "cch_1", func(b *state.Binding) error {
		b.Data = []byte(`{"token":"t2"}`) // refreshed
		return nil
	})
	b, _, _ := k.Binding(ctx, "cch_1")
	fmt.Println(err, b.Key, b.State, string(b.Data))
	fmt.Println(k.UpdateBinding(ctx, "cch_1", func(b *state.Binding) error { b.Key = "chat-43"; return nil }) != nil)
	// Output:
	// <nil> chat-42 connected {"token":"t2"}
	// true
}

// A store that is a BindingUpdater changes a binding in one step, so two
// replicas counting in the same binding lose no count; a channel without
// a binding is not found, and f is not called.
func ExampleBindingUpdater() {
	ctx := context.Background()
	var store state.BindingStore = state.NewMemoryBindingStore(0)
	_, _ = store.Bind(ctx, state.Binding{ChannelID: "cch_1", Key: "chat-42", State: state.BindingConnected, Data: []byte("cursor=7")})
	u := store.(state.BindingUpdater)
	old, found, err := u.Update(ctx, "cch_1", func(b *state.Binding) error {
		b.Data = []byte("cursor=8")
		return nil
	})
	now, _, _ := store.Binding(ctx, "cch_1")
	fmt.Println(string(old.Data), found, err, string(now.Data))
	_, found, err = u.Update(ctx, "cch_2", func(*state.Binding) error { panic("not called") })
	fmt.Println(found, err)
	// Output:
	// cursor=7 true <nil> cursor=8
	// false <nil>
}

// When the platform says the bot lost its access (it was removed from
// the chat), Revoke turns the channel's Descriptor to revoked: finals are
// refused and the conversation's events no longer reach xAgent until the
// user signs in again.
func ExampleConnector_Revoke() {
	ctx := context.Background()
	k, _ := kit.New(pretendCard(), quiet{}, nil)
	defer k.Close()
	_ = k.Bind(ctx, state.Binding{ChannelID: "cch_1", Key: "chat-42"})
	_ = k.Revoke(ctx, "cch_1")
	b, _, _ := k.Binding(ctx, "cch_1")
	fmt.Println(b.State)
	fmt.Println(k.Receive(ctx, kit.InboundEvent{Conversation: "chat-42", EventID: "update-9", Text: "still there?"}))
	// Output:
	// revoked
	// conversation "chat-42": connector: not bound to a conversation
}
