package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	kit "github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" { // the xAgent side of TestCrash_S1_XAgentKilledLosesNoFinal
		if err := crashHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "crash helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// chat is the Connector's platform: it records every post.
type chat struct {
	mu    sync.Mutex
	posts map[string][]post // by question
	got   chan struct{}
}

type post struct {
	text  string
	files []string // the attachments' bytes
}

func (c *chat) Post(_ context.Context, _ kit.Conversation, m *kit.Message) error {
	p := post{text: m.Text}
	for _, f := range m.Attachments {
		b, err := io.ReadAll(f)
		if err != nil {
			return imv2.NotPosted(err)
		}
		p.files = append(p.files, string(b))
	}
	q := strings.TrimSuffix(strings.Fields(m.Text)[0], "0") // FakeBrain's first piece is "<word>0 "
	c.mu.Lock()
	c.posts[q] = append(c.posts[q], p)
	c.mu.Unlock()
	c.got <- struct{}{}
	return nil
}

// lines sends every line written to it.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	for _, s := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l <- s
	}
	return len(p), nil
}

func waitLine(t *testing.T, l lines, prefix string) string {
	t.Helper()
	for {
		select {
		case s := <-l:
			if strings.HasPrefix(s, prefix) {
				return s
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line %q", prefix)
		}
	}
}

// TestAgent_AgainstARealConnectorAcrossARestart runs the agent against
// the connector kit over loopback: 14 questions, the Connector closed and
// started again on the same address and state after the first four (one
// of them maybe unanswered, unacked or unposted then). Every question is
// answered exactly once, with the text of its deltas; the 7th and 14th
// answers carry their file.
func TestAgent_AgainstARealConnectorAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	card := protocol.NewCard("im.agenttest", "Agent test", "1.0.0",
		protocol.SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "test", Label: "Test"})
	c := &chat{posts: map[string][]post{}, got: make(chan struct{}, 64)}
	startKit := func(addr string) (*kit.Connector, *boltstore.Store, string) {
		st, err := boltstore.Open(filepath.Join(dir, "kit.db"), boltstore.Options{})
		require.NoError(t, err)
		k, err := kit.New(card, c, &kit.Options{Store: st})
		require.NoError(t, err)
		var url string
		require.Eventually(t, func() bool { url, err = k.Start(addr); return err == nil }, 5*time.Second, 10*time.Millisecond)
		return k, st, url
	}
	k, st, url := startKit("127.0.0.1:0")

	ctx, cancel := context.WithCancel(context.Background())
	out := make(lines, 256)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{URL: url, State: filepath.Join(dir, "agent.db"), Brain: &FakeBrain{},
			Options: &imv2.Options{AckTimeout: time.Second}}, out)
	}()
	waitLine(t, out, "agent: channel ")
	ask := func(k *kit.Connector, i int) {
		require.NoError(t, k.Receive(context.Background(), kit.InboundEvent{
			Conversation: kit.DefaultConversationKey, EventID: fmt.Sprint("e", i), Text: fmt.Sprintf("question-%02d please", i),
		}))
	}
	for i := 1; i <= 4; i++ {
		ask(k, i)
	}
	for range 3 {
		<-c.got
	}
	require.NoError(t, k.Close())
	require.NoError(t, st.Close())
	k, st, _ = startKit(strings.TrimPrefix(url, "http://"))
	for i := 5; i <= 14; i++ {
		ask(k, i)
	}
	for range 11 {
		select {
		case <-c.got:
		case <-time.After(20 * time.Second):
			t.Fatal("not every question was answered")
		}
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, k.Close())
	require.NoError(t, st.Close())

	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i <= 14; i++ {
		q := fmt.Sprintf("question-%02d", i)
		require.Len(t, c.posts[q], 1, "%s answered once", q)
		p := c.posts[q][0]
		require.True(t, strings.HasPrefix(p.text, q+"0 "+q+"1 "+q+"2 "), p.text)
	}
	var files []string
	for _, ps := range c.posts {
		files = append(files, ps[0].files...)
	}
	require.Len(t, files, 2, "a file every 7th answer")
	for _, f := range files {
		require.Contains(t, f, "notes for: question-")
	}
}
