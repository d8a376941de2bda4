package xmppbridge

import (
	"context"
	"encoding/xml"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"mellium.im/xmpp/jid"
)

// readEncoder is what a session hands a handler: the element's content
// and end, and a writer.
type readEncoder struct {
	xml.TokenReader
	*xml.Encoder
}

// TestHandle_M9_RoutesPeopleMessagesOnly feeds message stanzas to the
// session's handler as the session would: a person's message reaches the
// readers of its conversation with the right event ID; the bot's own
// messages, corrections, errors, chat states and a room's subject do not.
func TestHandle_M9_RoutesPeopleMessagesOnly(t *testing.T) {
	const room = "team@muc.example.org"
	br := &Bridge{me: jid.MustParse("bot@example.org/r1"), cfg: Config{Nick: "bot", Logger: slog.New(slog.DiscardHandler)},
		readers: map[*queue]string{}, rooms: map[string]*roomState{}, changed: make(chan struct{}), ctx: context.Background()}
	chat, group := newQueue(), newQueue()
	br.readers[chat], br.readers[group] = "alice@example.org", room+roomSuffix
	feed := func(stanza string) {
		t.Helper()
		d := xml.NewDecoder(strings.NewReader(stanza))
		tok, err := d.Token()
		require.NoError(t, err)
		start := tok.(xml.StartElement)
		require.NoError(t, br.handle(readEncoder{d, xml.NewEncoder(io.Discard)}, &start))
	}
	got := func(q *queue) []incoming {
		var out []incoming
		for {
			in, ok := q.next()
			if !ok {
				return out
			}
			out = append(out, in)
		}
	}
	const sid = `<stanza-id xmlns="urn:xmpp:sid:0" by="bot@example.org" id="S1"/>`
	feed(`<message xmlns="jabber:client" from="alice@example.org/phone" type="chat" id="c1"><body>hi</body>` + sid + `</message>`)
	feed(`<message xmlns="jabber:client" from="alice@example.org/phone" type="chat" id="c2"><body>hi!</body><replace xmlns="urn:xmpp:message-correct:0" id="c1"/></message>`)
	feed(`<message xmlns="jabber:client" from="alice@example.org/phone" type="chat"><composing xmlns="http://jabber.org/protocol/chatstates"/></message>`)
	feed(`<message xmlns="jabber:client" from="alice@example.org" type="error" id="x"><body>bounced</body></message>`)
	feed(`<message xmlns="jabber:client" from="bot@example.org/r2" type="chat" id="own"><body>mine</body></message>`)
	feed(`<message xmlns="jabber:client" from="alice@example.org/phone" type="chat" id="f1"><body>http://up/x/a.png</body><x xmlns="jabber:x:oob"><url>http://up/x/a.png</url></x></message>`)
	require.Equal(t, []incoming{{id: "sid:S1", arch: "S1", text: "hi"}, {id: "id:f1", url: "http://up/x/a.png"}}, got(chat))

	feed(`<message xmlns="jabber:client" from="` + room + `/bot" type="groupchat" id="g0"><body>my reply</body></message>`)
	feed(`<message xmlns="jabber:client" from="` + room + `" type="groupchat" id="g1"><subject>topic</subject><body>topic</body></message>`)
	feed(`<message xmlns="jabber:client" from="` + room + `/alice" type="groupchat" id="g2"><body>hello room</body>` +
		`<stanza-id xmlns="urn:xmpp:sid:0" by="` + room + `" id="R7"/></message>`)
	require.Equal(t, []incoming{{id: "sid:R7", arch: "R7", from: "alice", text: "hello room"}}, got(group))
	require.Empty(t, got(chat))
}
