//go:build unix

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/sim"
)

const room = "team@" + mucDomain

// TestGroupChat_M9_RedeliveredStanzaIsOneUserMessage binds the Connector
// to a room (XEP-0045) on a real Prosody: alice's message in the room
// reaches the simulated xAgent, whose streamed reply shows in the room as
// the bot composing, then one message corrected in place to the final
// text. Then the Connector
// restarts on the same state: joining again, the bot gets the room's
// history, alice's message again with the same XEP-0359 stanza-id, and
// xAgent still has it once (M9); alice's next message reaches it as a
// second one.
func TestGroupChat_M9_RedeliveredStanzaIsOneUserMessage(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	alice.join(room, "alice")
	addr, state, logs := freeAddr(t), t.TempDir(), &lines{}
	conn := startConnector(t, p, addr, room+"?join", state, logs)
	defer func() {
		if conn != nil {
			conn.stop(t)
		}
	}()
	ctx := ctxFor(t)
	s, err := sim.Start(ctx, sim.Config{
		Connector: "http://" + addr, APIKey: apiKey, CardID: xmppbridge.CardID, Rate: 50,
		Reply: func(text string) string {
			return "Room echo: " + text + " — said in the team room, answered in the team room."
		},
	})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, conn.b.Reading(ctx))

	const want = "Room echo: hello room — said in the team room, answered in the team room."
	alice.say(room, "groupchat", "hello room")
	bot := room + "/bot"
	alice.waitFor("the final text in the room", func() bool {
		th := thread(alice.from(bot))
		return len(th) == 1 && th[0].Text == want
	})
	s.Wait()
	th := thread(alice.from(bot))
	require.GreaterOrEqual(t, th[0].Corrections, 1, "the draft was corrected in place")
	require.NotNil(t, alice.from(bot)[0].Composing, "the room saw the bot composing first")
	require.Equal(t, "active", lastChatState(alice.from(bot)))
	require.Len(t, s.UserMessages(), 1)

	// Restart: the room's history replays alice's message to the bot.
	conn.stop(t)
	before := logs.count("delayed=true") // 1 if the bot's first join came after alice's message
	conn = startConnector(t, p, addr, room+"?join", state, logs)
	alice.waitFor("the bot reading the room's history again", func() bool { return logs.count("delayed=true") > before })
	alice.say(room, "groupchat", "second")
	alice.waitFor("the reply to the second message", func() bool { return len(thread(alice.from(bot))) == 2 })
	s.Wait()
	users := s.UserMessages()
	require.Len(t, users, 2, "the redelivered message is no second user message")
	require.Equal(t, "hello room", users[0].Text)
	require.Equal(t, "second", users[1].Text)
	require.Len(t, thread(alice.from(bot)), 2, "one reply per user message")
	require.Positive(t, logs.count("event=sid:"))
	require.Zero(t, logs.count("event=oid:"), "every message is known by the room's stanza-id, not the sender's origin-id")
}
