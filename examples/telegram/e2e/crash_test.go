//go:build unix

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
)

// process is the telegram command run as an operator runs it.
type process struct {
	cmd  *exec.Cmd
	logs *lines
}

func startProcess(t *testing.T, em *emulator, addr, state string, args ...string) *process {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(botapitest.Token+"\n"), 0o600))
	p := &process{logs: &lines{}}
	p.cmd = exec.Command(bin, append([]string{"-listen", addr, "-state", state, "-token-file", tokenFile, "-server", em.API, "-log-level", "info"}, args...)...)
	p.cmd.Env = append(os.Environ(), "XAGENT_API_KEY="+apiKey)
	out, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	listening := make(chan bool, 1)
	go func() {
		r := bufio.NewReader(out)
		for sent := false; ; {
			line, err := r.ReadString('\n')
			_, _ = p.logs.Write([]byte(line))
			if !sent && strings.Contains(line, "listening on") {
				listening <- true
				sent = true
			}
			if err != nil {
				if !sent {
					listening <- false
				}
				return
			}
		}
	}()
	require.True(t, <-listening, "the command did not start: %s", p.logs.String())
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("command log:\n%s", p.logs.String())
		}
	})
	return p
}

// TestCrash_A5_M11_S8_SIGKILLMidBurstOf1000MessagesOver100Chats pairs 100
// chats (50 private, 50 groups), has their users send 10 messages each
// (1,000), and answers each with a reply streamed in 10 deltas and a
// final. Mid-burst, once 400 messages and edits were made, the Connector
// process is killed with SIGKILL and started again on its state directory.
// The kill lands once Telegram answered every chat's call 429 (retry_after
// 30 s) and the bot waits, so no call is half-applied: the Bot API has no idempotency key, so a call
// Telegram applied whose answer the process did not live to store (a
// window of one round trip) cannot be told from one it did not apply;
// README.md says what that window costs. Everything else is the crash:
// deltas lost, drafts and finals in flight or waiting for the rate limits,
// user messages not yet acked, the getUpdates offset.
// Then each chat shows exactly its 10 replies, each once, in the order the
// user wrote, none lost; xAgent got each chat's user messages in order;
// no chat got more than one send or edit a second, and the bot no more
// than 30 a second (Telegram's limits), across the crash too.
func TestCrash_A5_M11_S8_SIGKILLMidBurstOf1000MessagesOver100Chats(t *testing.T) {
	const chats, each = 100, 10
	em := startEmulator(t)
	addr, state := freeAddr(t), t.TempDir()
	proc := startProcess(t, em, addr, state)
	ctx := ctxFor(t, 10*time.Minute)
	ag := startAgent(t, ctx, addr, func(ctx context.Context, r *dataplane.Reply, m imv2.ChatMessage) {
		_ = stream(ctx, r, "re: "+m.Text+" "+strings.Repeat("·", 40), 10, 0)
	})
	ids := map[int64]string{}
	var all []int64
	for i := int64(1); i <= chats; i++ {
		c := i
		if i%2 == 0 {
			c = -i // a group
		}
		all = append(all, c)
		ids[c] = ag.pair(t, ctx, em, c)
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for k := range each {
			for _, c := range all {
				em.say(t, c, fmt.Sprintf("m%d-%d", c, k))
			}
		}
	}()
	require.Eventually(t, func() bool { return len(em.callsTo(0)) >= 400 }, 5*time.Minute, 10*time.Millisecond)
	open := em.closeDoor(t, 500*time.Millisecond)
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGKILL))
	_ = proc.cmd.Wait()
	open()
	time.Sleep(time.Second) // the operator's restart
	t.Logf("killed after %d messages and edits, at %v", len(em.callsTo(0)), time.Now())
	startProcess(t, em, addr, state)
	<-sent

	want := func(c int64) []string {
		var w []string
		for k := range each {
			w = append(w, fmt.Sprintf("re: m%d-%d %s", c, k, strings.Repeat("·", 40)))
		}
		return w
	}
	done := func() bool {
		s := em.shown()
		for _, c := range all {
			if len(s[c]) < each || s[c][each-1].Text != want(c)[each-1] {
				return false
			}
		}
		return true
	}
	if !assert.Eventually(t, done, 5*time.Minute, 200*time.Millisecond) {
		s := em.shown()
		for _, c := range all {
			if len(s[c]) != each || s[c][each-1].Text != want(c)[each-1] {
				t.Logf("chat %d shows %d: %v", c, len(s[c]), s[c])
			}
		}
		t.FailNow()
	}
	time.Sleep(2 * time.Second) // a late duplicate would show by now
	s := em.shown()
	for _, c := range all {
		var got []string
		for _, m := range s[c] {
			got = append(got, m.Text)
		}
		require.Equal(t, want(c), got, "chat %d: each reply once, in order (%d chats shown)", c, len(s))
		var users []string
		for k := range each {
			users = append(users, fmt.Sprintf("m%d-%d", c, k))
		}
		require.Equal(t, users, ag.userTexts(ids[c]), "chat %d: xAgent got the user's messages in order", c)
		checkPaced(t, fmt.Sprintf("chat %d", c), em.callsTo(c), tgbridge.PerChat)
	}
	checkPaced(t, "the bot", em.callsTo(0), tgbridge.PerBot)
}
