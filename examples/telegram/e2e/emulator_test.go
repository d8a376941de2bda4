//go:build unix

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
)

// emulator is telegram-test-api behind its proxy (internal/botapitest: the
// Bot API's getUpdates and webhook, a recording of every bot call), as the
// tests use it. sendChatAction is left 404, as the emulator lacks it, so
// the bridge's no-typing fallback shows (fallback_test.go).
type emulator struct{ *botapitest.Server }

func startEmulator(t *testing.T) *emulator {
	t.Helper()
	srv, err := botapitest.Start(ctxFor(t, time.Minute), botapitest.Options{Dir: ".."}) // examples/telegram: its node_modules (npm ci)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return &emulator{srv}
}

// say sends text to the bot as user in chat (a negative chat is a group),
// and with a webhook set waits until its update was posted.
func (e *emulator) say(t *testing.T, chat int64, text string) {
	t.Helper()
	require.NoError(t, e.Say(context.Background(), chat, text), "the emulator took the user's message")
}

// shown returns the bot's messages in each chat, oldest first, as last
// edited, without the pairing's note (none while the emulator does not
// answer).
func (e *emulator) shown() map[int64][]botapitest.Message {
	s, _ := e.Shown(context.Background())
	return s
}

// callsTo returns the message calls (send, edit) to chat, or to every
// chat for 0, without the pairing notes.
func (e *emulator) callsTo(chat int64) []botapitest.Call {
	var cs []botapitest.Call
	for _, c := range e.Calls() {
		if (c.Method == "sendMessage" || c.Method == "editMessageText") && (chat == 0 || c.Chat == chat) {
			cs = append(cs, c)
		}
	}
	return cs
}

// closeDoor answers every later bot call but getUpdates with a 429
// (retry_after 30 s), and returns once no call came for quiet: every
// conversation waits out its 429; open ends it.
func (e *emulator) closeDoor(t *testing.T, quiet time.Duration) (open func()) {
	open, err := e.CloseDoor(context.Background(), quiet)
	require.NoError(t, err)
	return open
}

// checkPaced fails t unless calls at these times kept to rate a second:
// the k-th call after any call came at least k/rate later, less slack. The
// kit's token bucket (burst 1) grants a call every 1/rate, and the call
// leaves after the bridge's own store write (its trace of a final) and
// the scheduler's say: under -race on a shared machine up to ~150 ms
// after, which the slack of 250 ms covers. A Connector at twice the rate
// fails it within two calls.
func checkPaced(t *testing.T, what string, at []botapitest.Call, rate float64) {
	t.Helper()
	const slack = 250 * time.Millisecond
	for i := range at {
		for j := i + 1; j < len(at); j++ {
			want := time.Duration(float64(j-i)/rate*float64(time.Second)) - slack
			if got := at[j].At.Sub(at[i].At); got < want {
				var around []string
				for k := max(0, i-3); k <= min(len(at)-1, j+3); k++ {
					around = append(around, fmt.Sprintf("%d %s %d %s", k, at[k].At.Format("05.000"), at[k].Chat, at[k].Method))
				}
				t.Fatalf("%s: calls %d (%s %q) and %d (%s %q) %v apart, under %v: more than %v a second\n%s",
					what, i, at[i].Method, at[i].Text, j, at[j].Method, at[j].Text, got, want+slack, rate, strings.Join(around, "\n"))
			}
		}
	}
}
