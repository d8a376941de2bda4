package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	kit "github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
)

// crashTotal finals are sent; crashKills are the posts after which each
// run of the xAgent side is SIGKILLed (five kills, all mid-burst).
const crashTotal = 500

var crashKills = []int{61, 139, 223, 301, 377}

// crashEnv switches the test binary into the xAgent side of the crash
// test: crashHelper instead of the tests.
const crashEnv = "IMV2_AGENT_CRASH_HELPER"

// posts counts the posts of each final at the Connector.
type posts struct {
	mu sync.Mutex
	n  map[string]int
	// total is signalled on each post.
	total chan struct{}
}

func (p *posts) Post(_ context.Context, _ kit.Conversation, m *kit.Message) error {
	p.mu.Lock()
	p.n[m.MessageID]++
	p.mu.Unlock()
	p.total <- struct{}{}
	return nil
}

// TestCrash_S1_XAgentKilledLosesNoFinal: the xAgent side sends 500 finals
// with its channel and pending finals in a bolt file, is SIGKILLed five
// times mid-burst and restarted on the same file each time (it goes on
// from the last final Send took, kept in a cursor file). The Connector
// shows every final exactly once: the ones pending at a kill come back
// from the file and are resent after the reopen (S1, S10), and a final
// acked before the kill but resent anyway (the cursor lagging Send by
// one) is answered duplicate, not shown again (S8).
func TestCrash_S1_XAgentKilledLosesNoFinal(t *testing.T) {
	dir := t.TempDir()
	card := protocol.NewCard("im.crashtest", "Crash test", "1.0.0",
		protocol.SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "test", Label: "Test"})
	p := &posts{n: map[string]int{}, total: make(chan struct{}, crashTotal*2)}
	st, err := boltstore.Open(filepath.Join(dir, "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	k, err := kit.New(card, p, &kit.Options{Store: st})
	require.NoError(t, err)
	defer k.Close()
	url, err := k.Start("127.0.0.1:0")
	require.NoError(t, err)

	run := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"=1", "CRASH_URL="+url, "CRASH_DIR="+dir)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		return cmd
	}
	shown := 0
	wait := func(n int) {
		for ; shown < n; shown++ {
			select {
			case <-p.total:
			case <-time.After(30 * time.Second):
				t.Fatalf("%d posts, waiting for %d", shown, n)
			}
		}
	}
	for _, at := range crashKills {
		cmd := run()
		wait(at)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
	}
	cmd := run()
	require.NoError(t, cmd.Wait(), "the last run sends the rest and waits for every ack")
	wait(crashTotal)

	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 1; i <= crashTotal; i++ {
		id := fmt.Sprintf("final-%04d", i)
		require.Equal(t, 1, p.n[id], "%s shown once", id)
	}
	require.Len(t, p.n, crashTotal)
}

// crashHelper is the xAgent side: it dials, reopens its channel from the
// bolt file (or opens one), sends finals from its cursor on, and exits 0
// once nothing is pending.
func crashHelper() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := os.Getenv("CRASH_DIR")
	st, err := boltstore.Open(filepath.Join(dir, "agent.db"), boltstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	first := make(chan []string, 1)
	client, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL:    os.Getenv("CRASH_URL"),
		Target: imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }),
		Store:  st,
		Options: &imv2.Options{Pending: st, Completed: st, AckTimeout: time.Second,
			RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond},

		OnConnected: func(_ string, ids []string) {
			select {
			case first <- ids:
			default:
			}
		},
		Advanced: dataplane.ClientAdvanced{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	if err != nil {
		return err
	}
	defer client.Close()
	var channelID string
	if ids := <-first; len(ids) > 0 {
		channelID = ids[0]
	} else {
		ch, err := client.OpenChannel(ctx, "")
		if err != nil {
			return err
		}
		channelID = ch
	}
	cursor := filepath.Join(dir, "cursor")
	next := 1
	if b, err := os.ReadFile(cursor); err == nil {
		if n, err := strconv.Atoi(string(b)); err == nil {
			next = n
		}
	}
	for i := next; i <= crashTotal; i++ {
		m := imv2.ChatMessage{MessageID: fmt.Sprintf("final-%04d", i), Text: fmt.Sprintf("final number %d", i)}
		if _, err := client.Send(ctx, channelID, m); err != nil {
			return err
		}
		// Renamed into place, so a kill never leaves a torn cursor.
		if err := os.WriteFile(cursor+".tmp", []byte(strconv.Itoa(i+1)), 0o600); err != nil {
			return err
		}
		if err := os.Rename(cursor+".tmp", cursor); err != nil {
			return err
		}
	}
	for {
		pending, err := st.List(ctx, client.Resolve(channelID))
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return errors.New("finals still pending at the deadline")
		}
	}
}
