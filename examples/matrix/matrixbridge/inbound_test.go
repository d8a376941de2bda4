package matrixbridge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"maunium.net/go/mautrix/event"
)

// TestConvert_WhatIsForwarded: which timeline events become a chat.message
// and with what text (M1, M3); the bot's own events, edits and redacted
// events never do; the bot's removal ends the binding.
func TestConvert_WhatIsForwarded(t *testing.T) {
	cases := []struct {
		name string
		evt  string
		text string // "" = not forwarded
		gone string
	}{
		{"text", `{"type":"m.room.message","sender":"@alice:hs","content":{"msgtype":"m.text","body":"hi"}}`, "hi", ""},
		{"notice", `{"type":"m.room.message","sender":"@alice:hs","content":{"msgtype":"m.notice","body":"note"}}`, "note", ""},
		{"emote", `{"type":"m.room.message","sender":"@alice:hs","content":{"msgtype":"m.emote","body":"waves"}}`, "waves", ""},
		{"own message", `{"type":"m.room.message","sender":"@bot:hs","content":{"msgtype":"m.text","body":"echo"}}`, "", ""},
		{"edit", `{"type":"m.room.message","sender":"@alice:hs","content":{"msgtype":"m.text","body":"* hi2","m.new_content":{"msgtype":"m.text","body":"hi2"},"m.relates_to":{"rel_type":"m.replace","event_id":"$e0"}}}`, "", ""},
		{"redacted", `{"type":"m.room.message","sender":"@alice:hs","content":{},"unsigned":{"redacted_because":{"type":"m.room.redaction","sender":"@alice:hs","content":{}}}}`, "", ""},
		{"empty body", `{"type":"m.room.message","sender":"@alice:hs","content":{"msgtype":"m.text","body":""}}`, "", ""},
		{"encrypted media keeps its name", `{"type":"m.room.message","sender":"@alice:hs","content":{"msgtype":"m.file","body":"secret.pdf","file":{"url":"mxc://hs/x"}}}`, "secret.pdf", ""},
		{"someone else joins", `{"type":"m.room.member","state_key":"@carol:hs","sender":"@carol:hs","content":{"membership":"join"}}`, "", ""},
		{"bot kicked", `{"type":"m.room.member","state_key":"@bot:hs","sender":"@alice:hs","content":{"membership":"leave"}}`, "", protocol.StatusRevoked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			br := &Bridge{log: discard()}
			var evt event.Event
			require.NoError(t, json.Unmarshal([]byte(c.evt), &evt))
			evt.ID = "$e1"
			ev, ok, err := br.convert(context.Background(), nil, Account{UserID: "@bot:hs"}, "!r:hs", &evt)
			if c.gone != "" {
				// The kit turns it into the binding's state (connector's
				// TestListen_GoneErrorsEndTheBinding).
				require.True(t, errors.Is(err, connector.ErrBindingRevoked), "the binding is to be revoked")
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.text != "", ok)
			if ok {
				require.Equal(t, c.text, ev.Text)
				require.Equal(t, connector.InboundEvent{Conversation: "!r:hs", EventID: "$e1", Text: c.text}, ev)
				m := imv2.ChatMessage{MessageID: MessageID(ev.Conversation, ev.EventID), Text: ev.Text}
				require.NoError(t, m.Validate(imv2.ToXAgent))
			}
		})
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
