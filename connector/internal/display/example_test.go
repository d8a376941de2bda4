package display_test

import (
	"context"
	"fmt"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
	"github.com/xagentkit/imv2/fakeclock"
)

// console is a toy platform that prints what it is asked to show.
type console struct{}

func (console) Post(_ context.Context, ch string, m *imv2.ChatMessage) error {
	fmt.Printf("send %s: %q (+%d files)\n", ch, m.Text, len(m.Files))
	return nil
}

// Typing shows the status, and the tool's name while one runs.
func (console) Typing(_ context.Context, ch string, a imv2.ChatActivity) error {
	switch a.Status {
	case imv2.ActivityIdle:
		fmt.Printf("typing %s: off\n", ch)
	case imv2.ActivityTool:
		fmt.Printf("typing %s: running %s\n", ch, a.ToolName)
	default:
		fmt.Printf("typing %s: %s\n", ch, a.Status)
	}
	return nil
}

// consoleEditor can edit what it posted, like Discord, Teams or Matrix.
type consoleEditor struct{ console }

func (consoleEditor) PostDraft(_ context.Context, ch, _, text string) (string, error) {
	fmt.Printf("post %s: %q\n", ch, text)
	return "msg-1", nil
}

func (consoleEditor) Edit(_ context.Context, _, handle, text string) error {
	fmt.Printf("edit %s: %q\n", handle, text)
	return nil
}

func (consoleEditor) Finish(_ context.Context, _, handle string, m *imv2.ChatMessage) error {
	fmt.Printf("finish %s: %q (+%d files)\n", handle, m.Text, len(m.Files))
	return nil
}

// consoleStreamer has a native append-style stream, like Slack.
type consoleStreamer struct{ console }

func (consoleStreamer) Draft(_ context.Context, _ string, d display.Draft) (string, error) {
	fmt.Printf("append %q\n", d.Suffix)
	return "stream-1", nil
}

func (consoleStreamer) Finish(_ context.Context, _, handle string, m *imv2.ChatMessage) error {
	fmt.Printf("stop %s with %q\n", handle, m.Text)
	return nil
}

// An Editor gets post-then-edit: drafts within one interval are coalesced
// into one edit, and the final edits the same message. Pass the Target to
// imv2.NewChannel as its target; here the calls the Channel makes are made
// by hand, on a fake clock.
func ExampleNew_edit() {
	clk := fakeclock.New(time.Unix(0, 0))
	tg, err := display.New(consoleEditor{}, &display.Options{Clock: clk, Interval: 500 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer tg.Close()
	ctx := context.Background()

	_ = tg.SetActivity(ctx, "general", imv2.ChatActivity{Status: imv2.ActivityThinking})
	_ = tg.SetActivity(ctx, "general", imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "calculator"})
	_ = tg.UpdateDraft(ctx, "general", "m1", "The")
	_ = tg.UpdateDraft(ctx, "general", "m1", "The answer")
	_ = tg.UpdateDraft(ctx, "general", "m1", "The answer is")
	clk.Advance(500 * time.Millisecond)
	_ = tg.PostMessage(ctx, "general", &imv2.ChatMessage{MessageID: "m1", Text: "The answer is 42."})
	fmt.Println(tg.Mode())
	// Output:
	// typing general: thinking
	// typing general: running calculator
	// post general: "The"
	// typing general: off
	// edit msg-1: "The answer is"
	// finish msg-1: "The answer is 42." (+0 files)
	// edit
}

// A Drafter gets every draft at once, with the new suffix for
// append-style APIs.
func ExampleNew_stream() {
	tg, err := display.New(consoleStreamer{}, nil)
	if err != nil {
		panic(err)
	}
	defer tg.Close()
	ctx := context.Background()

	_ = tg.UpdateDraft(ctx, "general", "m1", "Hello")
	_ = tg.UpdateDraft(ctx, "general", "m1", "Hello, wor")
	_ = tg.UpdateDraft(ctx, "general", "m1", "Hello, world")
	_ = tg.PostMessage(ctx, "general", &imv2.ChatMessage{MessageID: "m1", Text: "Hello, world!"})
	fmt.Println(tg.Mode())
	// Output:
	// append "Hello"
	// append ", wor"
	// append "ld"
	// stop stream-1 with "Hello, world!"
	// stream
}

// A platform that can only send (SMS, e-mail) shows no temporary text: one
// send per message, with the final's text and files (K5).
func ExampleNew_buffer() {
	tg, err := display.New(console{}, nil)
	if err != nil {
		panic(err)
	}
	defer tg.Close()
	ctx := context.Background()

	_ = tg.UpdateDraft(ctx, "+15550100", "m1", "Your code")
	_ = tg.UpdateDraft(ctx, "+15550100", "m1", "Your code is")
	_ = tg.PostMessage(ctx, "+15550100", &imv2.ChatMessage{
		MessageID: "m1",
		Text:      "Your code is 1234.",
		Files:     []imv2.File{{Type: imv2.FileImage, FileRef: "fref_1"}},
	})
	fmt.Println(tg.Mode())
	// Output:
	// send +15550100: "Your code is 1234." (+1 files)
	// buffer
}
