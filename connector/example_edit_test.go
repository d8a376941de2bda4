package connector_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"sync"

	"github.com/xagentkit/imv2"
	kit "github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/sim"
)

// editChat is a pretend IM service that can edit what it posted (mode
// edit): a reply appears as a temporary message, is edited as it grows
// and finished into the final. Its first new message is refused with a
// rate limit.
type editChat struct {
	mu      sync.Mutex
	msgs    []string // a message's handle is its index
	posts   int
	limited int
	tool    string // the last tool the typing indicator showed
}

// newMessage posts text, or refuses it with a rate limit: not posted, so
// the kit waits retryAfter and calls again.
func (c *editChat) newMessage(text string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.posts++; c.posts == 1 {
		c.limited++
		return "", imv2.RetryAfter(errors.New("429 Too Many Requests"), retryAfter)
	}
	c.msgs = append(c.msgs, text)
	return strconv.Itoa(len(c.msgs) - 1), nil
}

func (c *editChat) set(handle, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, err := strconv.Atoi(handle)
	if err != nil || i >= len(c.msgs) {
		return imv2.Refused(fmt.Errorf("no message %q", handle)) // never call again
	}
	c.msgs[i] = text
	return nil
}

// PostDraft shows a reply's first draft as a temporary message.
func (c *editChat) PostDraft(_ context.Context, _ kit.Conversation, _, text string) (string, error) {
	return c.newMessage(text)
}

// Edit shows a newer draft in the temporary message (at most once per
// Options.Advanced.Display.Interval).
func (c *editChat) Edit(_ context.Context, _ kit.Conversation, handle, text string) error {
	return c.set(handle, text)
}

// Finish turns the temporary message into the final.
func (c *editChat) Finish(_ context.Context, _ kit.Conversation, handle string, m *kit.Message) error {
	return c.set(handle, m.Text)
}

// Post shows a final that had no draft.
func (c *editChat) Post(_ context.Context, _ kit.Conversation, m *kit.Message) error {
	_, err := c.newMessage(m.Text)
	return err
}

// Typing shows what the agent is doing; idle clears it.
func (c *editChat) Typing(_ context.Context, _ kit.Conversation, a imv2.ChatActivity) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.Status == imv2.ActivityTool {
		c.tool = a.ToolName
	}
	return nil
}

// A platform that edits its messages, in mode edit: the simulated agent
// streams two replies; each shows as a temporary message edited as it
// grows, then finished. The first post is rate-limited and made again
// after the wait, and the replies stay in the order they were sent.
func Example_editMode() {
	ctx := context.Background()
	c := &editChat{}
	k, err := kit.New(pretendChatCard, c, &kit.Options{Mode: kit.ModeEdit})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close()
	url, err := k.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	// Rate: deltas arrive apart, so the drafts are seen growing.
	agent, err := sim.Start(ctx, sim.Config{Connector: url, Rate: 20})
	if err != nil {
		log.Fatal(err)
	}
	defer agent.Close()
	for _, text := range []string{"The answer is forty-two.", "Anything else?"} {
		if err := agent.Reply(ctx, agent.ChannelID(), text); err != nil {
			log.Fatal(err)
		}
	}
	// Reply returns once the final is sent; WaitAcked once it is shown.
	if err := agent.WaitAcked(ctx, 2); err != nil {
		log.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Printf("rate-limited %d time(s); typing showed %s\n", c.limited, c.tool)
	for _, m := range c.msgs {
		fmt.Println(m)
	}
	// Output:
	// rate-limited 1 time(s); typing showed web_search
	// The answer is forty-two.
	// Anything else?
}
