//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/sim"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func lastTypingHas(snaps [][]id.UserID, u id.UserID) bool {
	return len(snaps) > 0 && typingHas(snaps[len(snaps)-1:], u)
}

// TestConnector_Simulator runs the SDK's xAgent simulator against the
// Matrix Connector, with 30 % of its frames sent twice: a room message is
// answered with thinking, a tool, a streamed reply, a final with a file
// and idle, and the room shows the reply once with the final text, the
// file, and typing cleared.
func TestConnector_Simulator(t *testing.T) {
	w := newWorld(t)
	addr := freeAddr(t)
	conn := startConnector(t, addr, "")
	defer conn.stop(t)
	ctx := ctxFor(t)
	attach := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(attach, []byte("simulated attachment\n"), 0o600))

	s, err := sim.Start(ctx, sim.Config{
		Connector: "http://" + addr, APIKey: apiKey, Attach: attach, Duplicate: 30,
		Reply: func(text string) string { return "Echo: " + text },
	})
	require.NoError(t, err)
	defer s.Close()
	// The room is bound the way imv2sim -auth binds it: auth.start with the
	// form, the Card's only flow.
	a, err := s.SignIn(ctx, "", w.form())
	require.NoError(t, err)
	require.Equal(t, protocol.AuthAuthenticated, a.Status, a.Message)

	bot := id.UserID(w.botID)
	w.alice.say("what is the weather like on the moon")
	const want = "Echo: what is the weather like on the moon"
	w.alice.waitFor("the file of the reply", func() bool { return lastMsgType(w.alice.messagesFrom(bot)) == event.MsgFile })
	s.Wait()
	// The simulator's activity changes within milliseconds, faster than
	// alice's /sync, which reports only the current typing state (the main
	// test checks on and off). Alice typing is the marker: a snapshot with
	// her and without the bot shows the bot was not left typing.
	_, err = w.alice.cli.UserTyping(ctx, w.room, true, 30*time.Second)
	require.NoError(t, err)
	me := w.alice.cli.UserID
	w.alice.waitFor("the bot not typing", func() bool {
		return lastTypingHas(w.alice.typing, me) && !lastTypingHas(w.alice.typing, bot)
	})
	originals, edits := split(w.alice.messagesFrom(bot))
	require.Len(t, originals, 2, "one text event (then edited) and one file event")
	require.Equal(t, want, lastShown(append([]*event.Event{originals[0]}, edits...)))
	require.Equal(t, "notes.txt", originals[1].Content.AsMessage().Body)
	require.Len(t, s.UserMessages(), 1, "the room message reached the agent once")
}
