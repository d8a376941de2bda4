//go:build unix

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/sim"
)

// TestReconnect_ServerRestartLosesNoMessage restarts Prosody under a
// running Connector: the bot signs in again by itself, its reader of the
// chat carries on, and the message alice sent while the bot was away
// (kept by the server, XEP-0160) reaches xAgent and is answered — once.
func TestReconnect_ServerRestartLosesNoMessage(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	addr := freeAddr(t)
	conn := startConnector(t, p, addr, aliceJID, "", nil)
	defer conn.stop(t)
	ctx := ctxFor(t)
	s, err := sim.Start(ctx, sim.Config{Connector: "http://" + addr, APIKey: apiKey, CardID: xmppbridge.CardID,
		Reply: func(text string) string { return "Echo: " + text }})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, conn.b.Reading(ctx))
	alice.say(botJID, "chat", "before")
	alice.waitFor("the first reply", func() bool { th := thread(alice.from(botJID)); return len(th) == 1 && th[0].Text == "Echo: before" })

	p.stop()
	p.start(t)
	alice = newUser(t, p)
	alice.say(botJID, "chat", "while you were away")
	alice.waitFor("the reply after the restart", func() bool {
		th := thread(alice.from(botJID))
		return len(th) == 1 && th[0].Text == "Echo: while you were away"
	})
	s.Wait()
	users := s.UserMessages()
	require.Len(t, users, 2)
	require.Equal(t, "while you were away", users[1].Text)
}
