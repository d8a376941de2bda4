package connector_test

import (
	"context"
	"fmt"
	"github.com/xagentkit/imv2"
	kit "github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/sim"
)

type chat struct{ posts, shown chan string }

func (chat) Draft(context.Context, kit.Conversation, kit.Draft) (string, error) { return "d1", nil }
func (chat) Typing(_ context.Context, _ kit.Conversation, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityTool {
		fmt.Println("typing: using", a.ToolName)
	}
	return nil
}
func (c chat) Post(_ context.Context, to kit.Conversation, m *kit.Message) error {
	if c.posts <- m.Text; len(c.posts) == 1 {
		return kit.RetryAfter(fmt.Errorf("429 Too Many Requests"), 1e8) // Retry-After: 100 ms
	}
	c.shown <- fmt.Sprintf("%s: %s (draft %s, try %d)", to.Key, m.Text, m.Draft, len(c.posts))
	return nil
}
func Example() { // chat is a pretend IM service: it drafts, types, and rate-limits its first post
	card, _ := protocol.DecodeCard([]byte(`{"schema":"xagent.connector/v1","protocol_version":"3.0","build":{"version":"1.0.0","build_time":"2026-12-01"},"connector_card_id":"im.pretend","connector":{"name":"Pretend","version":"1.0.0"},"supports":{"target_types":["im"],"targets":[{"target_type":"im","provider":"pretend","label":"Pretend"}],"profiles":["xagent.im.v2"]}}`))
	c := chat{make(chan string, 2), make(chan string, 1)}
	k, _ := kit.New(card, c, nil) // no API key, state in memory, mode stream (chat drafts)
	url, _ := k.Start("127.0.0.1:0")
	agent, _ := sim.Start(context.Background(), sim.Config{Connector: url, Rate: 10}) // xAgent: echoes, streamed
	defer func() { agent.Close(); k.Close() }()
	_ = k.Receive(context.Background(), kit.Event{Conversation: "default", EventID: "update-1", Text: "hi"})
	fmt.Println(<-c.shown)
	// Output:
	// typing: using web_search
	// default: You said: hi (draft d1, try 2)
}
