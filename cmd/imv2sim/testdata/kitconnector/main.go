// Command kitconnector is a Connector built with connector.New as an
// author ships one, for the test of `imv2sim conform -exec`: a chat that
// shows nothing itself (post, edit, typing all succeed) and takes a
// person's lines from stdin ("/file PATH" for a file). Its one flag for the
// suite is -events, which sets Options.Advanced.Events to os.Stdout: the
// kit writes what the platform showed, and the author writes no observer.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/testcard"
)

// chat is the platform: every call succeeds.
type chat struct{}

func (chat) Post(context.Context, connector.Conversation, *connector.Message) error { return nil }

func (chat) PostDraft(_ context.Context, _ connector.Conversation, messageID, _ string) (string, error) {
	return "h-" + messageID, nil
}

func (chat) Edit(context.Context, connector.Conversation, string, string) error { return nil }

func (chat) Typing(context.Context, connector.Conversation, imv2.ChatActivity) error { return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	events := flag.Bool("events", false, "write what the platform showed on stdout, one JSON object a line (imv2sim conform -exec)")
	flag.Parse()
	opts := &connector.Options{}
	opts.Advanced.Channel = &imv2.Options{DeltaIdleTTL: time.Second, DeltaSweep: 100 * time.Millisecond, ActivityTimeout: time.Second}
	if *events {
		opts.Advanced.Events = os.Stdout
	}
	k, err := connector.New(testcard.IM("kitconnector", "Kit connector"), chat{}, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	url, err := k.Start(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "listening on", url)
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		ev := connector.InboundEvent{Conversation: connector.DefaultConversationKey, EventID: imv2.NewMessageID(), Text: in.Text()}
		if path, ok := strings.CutPrefix(in.Text(), "/file "); ok {
			ev.Text = ""
			ev.Files = []connector.InboundFile{{Filename: filepath.Base(path), Open: func() (io.ReadCloser, error) { return os.Open(path) }}}
		}
		if err := k.Receive(ctx, ev); err != nil {
			fmt.Fprintln(os.Stderr, "receive:", err)
		}
	}
	k.Close()
}
