package connector_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/xagentkit/imv2"
	kit "github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/sim"
)

// pretendChatCard tells xAgent what the Connector is: one IM target.
var pretendChatCard = protocol.NewCard("im.pretend", "Pretend chat", "1.0.0",
	protocol.SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "pretend", Label: "Pretend"},
)

// retryAfter is the wait the pretend chat asks for when it rate-limits.
const retryAfter = 100 * time.Millisecond

// chat is a pretend IM service: it shows drafts and a typing indicator,
// and answers its first post with a rate limit.
type chat struct{ posts, shown chan string }

// Draft shows the text so far of a streamed reply (mode stream).
func (chat) Draft(context.Context, kit.Conversation, kit.Draft) (string, error) {
	return "d1", nil
}

// Typing shows what the agent is doing.
func (chat) Typing(_ context.Context, _ kit.Conversation, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityTool {
		fmt.Println("typing: using", a.ToolName)
	}
	return nil
}

// Post shows a final reply. The first is refused with a rate limit: not
// posted, so the kit waits retryAfter and posts it again.
func (c chat) Post(_ context.Context, to kit.Conversation, m *kit.Message) error {
	c.posts <- m.Text
	if len(c.posts) == 1 {
		return imv2.RetryAfter(errors.New("429 Too Many Requests"), retryAfter)
	}
	c.shown <- fmt.Sprintf("%s: %s (draft %s, try %d)", to.Key, m.Text, m.Draft, len(c.posts))
	return nil
}

func Example() {
	c := chat{posts: make(chan string, 2), shown: make(chan string, 1)}
	// No API key, state in memory, mode stream (chat has Draft).
	k, err := kit.New(pretendChatCard, c, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close()
	url, err := k.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	// xAgent, simulated: it answers every user message with a streamed echo.
	agent, err := sim.Start(context.Background(), sim.Config{Connector: url, Rate: 10})
	if err != nil {
		log.Fatal(err)
	}
	defer agent.Close()

	// A person says "hi" in the default conversation.
	hi := kit.InboundEvent{
		Conversation: kit.DefaultConversationKey, EventID: "update-1", Text: "hi",
	}
	if err := k.Receive(context.Background(), hi); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-c.shown)
	// Output:
	// typing: using web_search
	// default: You said: hi (draft d1, try 2)
}
