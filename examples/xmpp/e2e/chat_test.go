//go:build unix

package e2e

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/sim"
)

// TestChat_D8_M11_StreamedReplyIsOneCorrectedMessage runs the SDK's xAgent
// simulator against the XMPP Connector over a real Prosody, in a 1:1 chat
// with alice: her message reaches xAgent once (M9), the simulator answers
// with thinking, a tool, a streamed reply and a final with a file, and
// alice's client sees the bot composing (C5), one message corrected in
// place (XEP-0308) whose last correction is exactly the final text (D8,
// M11), the file as an XEP-0363 upload with the same bytes (M12), and
// the chat state active again once the reply started (C6, C7).
func TestChat_D8_M11_StreamedReplyIsOneCorrectedMessage(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	addr := freeAddr(t)
	conn := startConnector(t, p, addr, aliceJID, "", nil)
	defer conn.stop(t)
	ctx := ctxFor(t)
	const content = "simulated attachment\n"
	s, err := sim.Start(ctx, sim.Config{
		Connector: "http://" + addr, APIKey: apiKey, CardID: xmppbridge.CardID, Attach: attachment(t, content),
		Rate: 50, Duplicate: 30, Reply: func(text string) string {
			return "Echo: " + text + " — the moon has no weather to speak of, only a thin exosphere."
		},
	})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, conn.b.Reading(ctx))

	const said = "what is the weather like on the moon"
	const want = "Echo: " + said + " — the moon has no weather to speak of, only a thin exosphere."
	sent := alice.say(botJID, "chat", said)
	var finalAt time.Time
	alice.waitFor("the final text", func() bool {
		th := thread(alice.from(botJID))
		if len(th) > 0 && th[0].Text == want && finalAt.IsZero() {
			finalAt = th[0].LastAt
		}
		return len(th) == 2 && th[1].URL != ""
	})
	s.Wait()

	msgs := alice.from(botJID)
	require.NotNil(t, msgs[0].Composing, "composing before the first draft")
	require.Nil(t, msgs[0].Body)
	require.Equal(t, "active", lastChatState(msgs), "not left composing")
	th := thread(msgs)
	require.Len(t, th, 2, "one corrected message for the text, one for the file: %+v", th)
	require.Equal(t, want, th[0].Text)
	require.GreaterOrEqual(t, th[0].Corrections, 1, "the draft was corrected in place")
	for _, m := range msgs {
		if m.Replace != nil {
			require.Equal(t, th[0].ID, m.Replace.ID, "every correction names the draft")
		}
	}
	require.Equal(t, th[1].URL, th[1].Text, "the file message's body is its URL")
	require.Equal(t, content, string(download(t, th[1].URL)))
	require.Len(t, s.UserMessages(), 1, "alice's message reached xAgent once")
	t.Logf("send → final shown: %s; corrections of the reply: %d; deltas: %d",
		finalAt.Sub(sent).Round(time.Millisecond), th[0].Corrections, len(sim.Pieces(want)))
}

// lastChatState is the chat state the messages leave the bot in.
func lastChatState(msgs []seen) string {
	st := ""
	for _, m := range msgs {
		switch {
		case m.Composing != nil:
			st = "composing"
		case m.Active != nil:
			st = "active"
		}
	}
	return st
}

// TestChat_M6_SharedFileReachesXAgent: alice shares a file the way XMPP
// clients do (an XEP-0363 upload to the server, then a message whose body
// and XEP-0066 out-of-band data are its URL); the Connector downloads it
// from the upload service and offers it to xAgent, which fetches the same
// bytes through the signed download_url (M6, T3).
func TestChat_M6_SharedFileReachesXAgent(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	addr := freeAddr(t)
	conn := startConnector(t, p, addr, aliceJID, "", nil)
	defer conn.stop(t)
	ctx := ctxFor(t)
	s, err := sim.Start(ctx, sim.Config{Connector: "http://" + addr, APIKey: apiKey, CardID: xmppbridge.CardID})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, conn.b.Reading(ctx))

	data := bytes.Repeat([]byte("moon dust "), 10_000)
	url := alice.upload("dust.txt", "text/plain", data)
	alice.share(botJID, url)
	alice.waitFor("the reply to the file", func() bool { return len(thread(alice.from(botJID))) == 1 })
	s.Wait()
	users := s.UserMessages()
	require.Len(t, users, 1)
	require.Empty(t, users[0].Text, "the body repeating the URL is no text")
	require.Len(t, users[0].Files, 1)
	require.Equal(t, "dust.txt", users[0].Files[0].Filename)
	got, err := s.Fetch(ctx, users[0].Files[0])
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the offered file's bytes differ")
}
