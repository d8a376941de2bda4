//go:build unix

package e2e

import (
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/sim"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"
)

// TestRoom_NickSquattedBotJoinsUnderAnotherNick: mallory sits in the room
// under the bot's nick before the bot joins. The bot joins under another
// nick (and says so in its log), alice's message reaches xAgent and the
// reply shows in the room; after mallory leaves it still does. Before,
// the room refused the join (conflict), nothing was logged, /readyz said
// ready, and the bot heard nothing in that room for good.
func TestRoom_NickSquattedBotJoinsUnderAnotherNick(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	alice.join(room, "alice")
	mallory := newUserAs(t, p, malloryJID, malloryPass)
	mallory.join(room, "bot")
	alice.waitFor("mallory in the room as bot", func() bool { return len(alice.presences(room+"/bot")) > 0 })
	addr, logs := freeAddr(t), &lines{}
	conn := startConnector(t, p, addr, room+"?join", "", logs)
	defer conn.stop(t)
	ctx := ctxFor(t)
	s, err := sim.Start(ctx, sim.Config{Connector: "http://" + addr, APIKey: apiKey, CardID: xmppbridge.CardID,
		Reply: func(text string) string { return "Echo: " + text }})
	require.NoError(t, err)
	defer s.Close()
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, conn.b.Reading(waitCtx), "the bot never got into the room")

	alice.say(room, "groupchat", "anyone there?")
	alice.waitFor("the reply under the bot's other nick", func() bool { return replyIn(alice, "Echo: anyone there?") != "" })
	nick := replyIn(alice, "Echo: anyone there?")
	require.True(t, strings.HasPrefix(nick, room+"/bot-"), "the reply came from %s", nick)
	require.Equal(t, 1, logs.count("the bot's nick is taken in the room"))

	mallory.send(struct {
		XMLName xml.Name `xml:"jabber:client presence"`
		To      string   `xml:"to,attr"`
		Type    string   `xml:"type,attr"`
	}{To: room + "/bot", Type: "unavailable"})
	alice.say(room, "groupchat", "still there?")
	alice.waitFor("the reply after mallory left", func() bool { return replyIn(alice, "Echo: still there?") != "" })
	s.Wait()
	require.Len(t, s.UserMessages(), 2)
}

// replyIn returns who sent the room a message with text, or "".
func replyIn(u *client, text string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range u.msgs {
		if m.body() == text && m.Type == "groupchat" {
			return m.From
		}
	}
	return ""
}

// TestRoom_ReadyzSaysWhyTheRoomIsNotJoined: alice owns a room and bans
// the bot. /readyz answers 503 and names the room and the refusal while
// a reader reads it. Before, it said ready.
func TestRoom_ReadyzSaysWhyTheRoomIsNotJoined(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	const closed = "closed@" + mucDomain
	alice.join(closed, "alice")
	alice.waitFor("alice in her room", func() bool { return len(alice.presences(closed+"/alice")) > 0 })
	ctx := ctxFor(t)
	ban := xml.NewDecoder(strings.NewReader(`<query xmlns="http://jabber.org/protocol/muc#admin"><item affiliation="outcast" jid="` + botJID + `"/></query>`))
	require.NoError(t, alice.s.UnmarshalIQElement(ctx, ban, stanza.IQ{Type: stanza.SetIQ, To: jid.MustParse(closed)}, nil))

	addr, logs := freeAddr(t), &lines{}
	conn := startConnector(t, p, addr, closed+"?join", "", logs)
	defer conn.stop(t)
	s, err := sim.Start(ctx, sim.Config{Connector: "http://" + addr, APIKey: apiKey, CardID: xmppbridge.CardID})
	require.NoError(t, err)
	defer s.Close()
	code, body := waitReadyz(t, addr, func(code int, body string) bool { return strings.Contains(body, "forbidden") })
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, closed)
	require.Positive(t, logs.count("the room refused the bot"))
}

// readyz asks the Connector's /readyz.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReadyz asks /readyz until done says the answer is the one awaited,
// or waitTimeout; it returns the last answer.
func waitReadyz(t *testing.T, addr string, done func(code int, body string) bool) (int, string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		code, body := readyz(t, addr)
		if done(code, body) || time.Now().After(deadline) {
			return code, body
		}
		time.Sleep(50 * time.Millisecond) // polling another process's answer, not timing
	}
}
