//go:build unix

package e2e

import (
	"encoding/xml"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/sim"
)

// forged is a message whose sender adds an XEP-0359 <stanza-id/> naming
// the bot's JID, as only the bot's server may.
type forged struct {
	XMLName  xml.Name `xml:"jabber:client message"`
	To       string   `xml:"to,attr"`
	Type     string   `xml:"type,attr"`
	Body     string   `xml:"body"`
	StanzaID struct {
		By string `xml:"by,attr"`
		ID string `xml:"id,attr"`
	} `xml:"urn:xmpp:sid:0 stanza-id"`
}

// TestStanzaID_M9_ForgedIDIsNoDuplicate: alice sends two messages that
// carry the same forged stanza-id by the bot's JID. Prosody 0.12 keeps
// the forgery beside its own (it strips it from its archive's copy
// only); the bridge must know each message by the server's own, so both
// reach xAgent. Before, the second was taken for a redelivery of the
// first and dropped: a sender could suppress messages at will.
func TestStanzaID_M9_ForgedIDIsNoDuplicate(t *testing.T) {
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

	for _, text := range []string{"first", "second"} {
		m := forged{To: botJID, Type: "chat", Body: text}
		m.StanzaID.By, m.StanzaID.ID = botJID, "forged-1"
		alice.send(m)
	}
	alice.say(botJID, "chat", "marker")
	alice.waitFor("the marker's reply", func() bool {
		for _, th := range thread(alice.from(botJID)) {
			if th.Text == "Echo: marker" {
				return true
			}
		}
		return false
	})
	s.Wait()
	var got []string
	for _, u := range s.UserMessages() {
		got = append(got, u.Text)
	}
	require.Equal(t, []string{"first", "second", "marker"}, got)
}
