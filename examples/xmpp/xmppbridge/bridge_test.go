package xmppbridge

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/protocol"
)

func TestNewCard_H1_Valid(t *testing.T) {
	c := NewCard(protocol.Build{Version: "1", BuildTime: "2612020000"})
	require.NoError(t, c.Validate())
	require.Empty(t, c.AuthFlows, "every channel is bound to the configured conversation")
}

// TestNew_RefusesIncompleteConfig: each required field, and a
// conversation that is no bare JID, fails New before anything runs.
func TestNew_RefusesIncompleteConfig(t *testing.T) {
	ok := Config{Build: protocol.Build{Version: "1", BuildTime: "2612020000"}, APIKey: "k",
		JID: "bot@example.org", Password: "p", Conversation: "alice@example.org"}
	for name, f := range map[string]func(*Config){
		"no API key":              func(c *Config) { c.APIKey = "" },
		"no JID":                  func(c *Config) { c.JID = "" },
		"a domain as JID":         func(c *Config) { c.JID = "example.org" },
		"no password":             func(c *Config) { c.Password = "" },
		"no conversation":         func(c *Config) { c.Conversation = "" },
		"a full JID conversation": func(c *Config) { c.Conversation = "alice@example.org/phone" },
		"a domain conversation":   func(c *Config) { c.Conversation = "example.org" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			f(&cfg)
			_, err := New(cfg)
			require.Error(t, err)
		})
	}
}

// TestEventID_M9_StanzaIDOfTheArchive: a message is known by the
// stanza-id its archive (by) gave it — the same on every redelivery — not
// by one another entity added, nor by the sender's IDs when it has one.
func TestEventID_M9_StanzaIDOfTheArchive(t *testing.T) {
	m := message{ID: "c1", OriginID: &idAttr{"o1"}, StanzaIDs: []stanzaID{{ID: "forged", By: "evil@example.org"}, {ID: "s1", By: "room@muc.example.org"}}}
	require.Equal(t, "sid:s1", eventID(m, "room@muc.example.org"))
	// A sender's forgery by the archive's own JID comes before the
	// server's, which is appended: the last one counts.
	m.StanzaIDs = append([]stanzaID{{ID: "forged", By: "room@muc.example.org"}}, m.StanzaIDs...)
	require.Equal(t, "sid:s1", eventID(m, "room@muc.example.org"))
	require.Equal(t, "oid:o1", eventID(m, "bot@example.org"))
	m.OriginID = nil
	require.Equal(t, "id:c1", eventID(m, "bot@example.org"))
	m.ID = ""
	require.NotEqual(t, eventID(m, "bot@example.org"), eventID(m, "bot@example.org"), "no ID: never a duplicate")
}
