package dataplane_test

import (
	"context"
	"fmt"
	"log"

	"github.com/xagentkit/imv2"
	kit "github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
)

// inbox is the agent's Target: PostMessage's return is the ack (A4), so it
// only queues the question; the agent's work runs on its own goroutine.
type inbox chan imv2.ChatMessage

func (in inbox) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	select {
	case in <- *m:
		return nil
	default: // full: the Connector resends it after a backoff
		return imv2.NotPosted(fmt.Errorf("busy"))
	}
}

func Example_agent() {
	url := startConnector() // a Connector's base URL, as registered with xAgent
	defer k.Close()
	questions := make(inbox, 16)
	client, err := dataplane.Dial(context.Background(), dataplane.ClientConfig{
		URL:    url, // Dial and OpenChannel wait and retry until their ctx ends
		Target: questions,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ch, err := client.OpenChannel(context.Background(), "") // the channel's ID
	if err != nil {
		log.Fatal(err)
	}
	ask(ch, "What is 6 x 7?") // a person writes in the chat

	ctx := context.Background()
	q := <-questions
	r, err := client.NewReply(ch, "") // follows the channel if the Connector replaces it
	if err != nil {
		log.Fatal(err)
	}
	_ = r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking}) // best effort
	_ = r.Delta(ctx, "It is ")                                            // best effort
	d, err := r.Final(ctx, imv2.ChatMessage{Text: "It is 42. (" + q.Text + ")"})
	if err != nil {
		log.Fatal(err) // nothing pending: a full queue, a closed client
	}
	status, err := d.Wait(ctx) // resent by itself until the Connector's ack
	fmt.Println("outcome:", status, err)
	// Output:
	// shown: It is 42. (What is 6 x 7?)
	// outcome: accepted <nil>
}

// The Connector side of the example: the connector kit with a platform
// that prints what it shows.

var k *kit.Connector

type printer struct{}

func (printer) Post(_ context.Context, _ kit.Conversation, m *kit.Message) error {
	fmt.Println("shown:", m.Text)
	return nil
}

func startConnector() string {
	card := protocol.NewCard("im.example", "Example chat", "1.0.0",
		protocol.SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "ex", Label: "Example"})
	var err error
	if k, err = kit.New(card, printer{}, nil); err != nil {
		log.Fatal(err)
	}
	url, err := k.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	return url
}

func ask(_, text string) {
	ev := kit.InboundEvent{Conversation: kit.DefaultConversationKey, EventID: "e1", Text: text}
	if err := k.Receive(context.Background(), ev); err != nil {
		log.Fatal(err)
	}
}
