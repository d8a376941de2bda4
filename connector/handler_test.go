package connector_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

func TestCard_H1_ServedPublicAndEqualToConfig(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do(t, http.MethodGet, "/connector-card.json", "", nil, nil) // no key: public
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	var got protocol.Card
	require.NoError(t, json.Unmarshal(r.body, &got))
	assert.Equal(t, *testCard(), got)
	want, err := json.Marshal(testCard())
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(r.body))
}

func TestCard_H1_InvalidCardRefused(t *testing.T) {
	cases := map[string]func(c *protocol.Card){
		"schema":            func(c *protocol.Card) { c.Schema = "xagent.connector/v0" },
		"protocol_version":  func(c *protocol.Card) { c.ProtocolVersion = "1.0" },
		"build_time":        func(c *protocol.Card) { c.Build.BuildTime = "" },
		"connector_card_id": func(c *protocol.Card) { c.ConnectorCardID = " " },
		"connector.name":    func(c *protocol.Card) { c.Connector.Name = "" },
		"connector.version": func(c *protocol.Card) { c.Connector.Version = "" },
		"target_types":      func(c *protocol.Card) { c.Supports.TargetTypes = nil },
		"profiles":          func(c *protocol.Card) { c.Supports.Profiles = nil },
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			c := testCard()
			breakIt(c)
			_, err := connector.NewHandler(connector.HandlerConfig{Card: c, APIKey: testKey})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "H1")
		})
	}
	t.Run("nil card", func(t *testing.T) {
		_, err := connector.NewHandler(connector.HandlerConfig{APIKey: testKey})
		require.Error(t, err)
	})
	t.Run("api_key_required without key", func(t *testing.T) {
		_, err := connector.NewHandler(connector.HandlerConfig{Card: testCard()})
		require.Error(t, err)
	})
	t.Run("valid", func(t *testing.T) {
		_, err := connector.NewHandler(connector.HandlerConfig{Card: testCard(), APIKey: testKey})
		require.NoError(t, err)
	})
}

func TestSkill_H3_MarkdownOr404(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do(t, http.MethodGet, "/skill.md", "", nil, nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "text/markdown"))
	assert.Equal(t, "---\nname: connector-im-console\n---\n# Console\n", string(r.body))

	none := newEnv(t, func(c *connector.HandlerConfig) { c.Markdown = nil })
	r = none.do(t, http.MethodGet, "/skill.md", "", nil, nil)
	assert.Equal(t, http.StatusNotFound, r.status)
}

func TestHealth_H4_MatchesCardAndNeedsKey(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do(t, http.MethodGet, "/health", "", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)

	r = e.do(t, http.MethodGet, "/health", testKey, nil, nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, `{"status":"ok","connector_card_id":"im.console","connector_card_version":"0.0.1",`+
		`"protocol_version":"3.0","build":{"version":"0.0.7","git_tag":"v0.0.7","git_rev":"abc1234","build_time":"2607241200"}}`,
		string(r.body))

	// Field by field against the served Card, as xAgent compares them.
	var h struct {
		Status               string         `json:"status"`
		ConnectorCardID      string         `json:"connector_card_id"`
		ConnectorCardVersion string         `json:"connector_card_version"`
		ProtocolVersion      string         `json:"protocol_version"`
		Build                protocol.Build `json:"build"`
	}
	require.NoError(t, json.Unmarshal(r.body, &h))
	var card protocol.Card
	require.NoError(t, json.Unmarshal(e.do(t, http.MethodGet, "/connector-card.json", "", nil, nil).body, &card))
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, card.ConnectorCardID, h.ConnectorCardID)
	assert.Equal(t, card.Connector.Version, h.ConnectorCardVersion)
	assert.Equal(t, card.ProtocolVersion, h.ProtocolVersion)
	assert.Equal(t, card.Build, h.Build)
}

func TestHealth_H4_OpenWithoutConfiguredKey(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) {
		c.APIKey = ""
		c.Card.Security = nil
	})
	assert.Equal(t, http.StatusOK, e.do(t, http.MethodGet, "/health", "", nil, nil).status)
	assert.Contains(t, e.logs.String(), "no API key configured")
}

func TestAPIKey_W1_H4_T1_WrongOrMissingIs401AndNeverLeaks(t *testing.T) {
	e := newEnv(t, nil)
	wrong := []struct {
		name string
		hdr  map[string]string
	}{
		{"missing", nil},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}},
		{"other key", map[string]string{"Authorization": "Bearer sk-other"}},
		{"prefix of key", map[string]string{"Authorization": "Bearer " + testKey[:len(testKey)-1]}},
		{"key plus suffix", map[string]string{"Authorization": "Bearer " + testKey + "x"}},
		{"basic scheme", map[string]string{"Authorization": "Basic " + testKey}},
		{"bare key", map[string]string{"Authorization": testKey}},
		{"key in channel header", map[string]string{connector.HeaderChannelID: testKey}},
	}
	paths := []struct{ method, path string }{
		{http.MethodGet, "/health"}, {http.MethodGet, "/ws"}, {http.MethodPost, "/files/uploads"},
	}
	for _, w := range wrong {
		for _, p := range paths {
			r := e.do(t, p.method, p.path, "", w.hdr, strings.NewReader("x"))
			assert.Equal(t, http.StatusUnauthorized, r.status, "%s %s", w.name, p.path)
			assert.Equal(t, string(connector.CodeUnauthorized), errCode(t, r.body))
			assert.NotContains(t, string(r.body), "ws-reached")
		}
	}
	// The right key passes, the scheme case-insensitively.
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER "} {
		r := e.do(t, http.MethodGet, "/ws", "", map[string]string{"Authorization": scheme + testKey}, nil)
		assert.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "ws-reached", string(r.body))
	}
	// Exercise the other endpoints too, so their logs and bodies are checked.
	mustUpload(t, e, "cch_1", form{filename: "a.txt", file: []byte("hi")})
	e.do(t, http.MethodGet, "/health", testKey, nil, nil)
	e.do(t, http.MethodGet, "/connector-card.json", testKey, nil, nil)

	logs := e.logs.String()
	require.Contains(t, logs, "unauthorized request") // the logger did capture
	for _, hay := range []string{logs, e.bodies.String()} {
		assert.NotContains(t, hay, testKey)
		assert.NotContains(t, hay, testKey[:12])
	}
}

func TestWS_W1_DelegatedAfterKey(t *testing.T) {
	e := newEnv(t, nil)
	assert.Equal(t, http.StatusUnauthorized, e.do(t, http.MethodGet, "/ws", "", nil, nil).status)
	assert.Equal(t, "ws-reached", string(e.do(t, http.MethodGet, "/ws", testKey, nil, nil).body))

	none := newEnv(t, func(c *connector.HandlerConfig) { c.WS = nil })
	assert.Equal(t, http.StatusNotFound, none.do(t, http.MethodGet, "/ws", testKey, nil, nil).status)
}

func TestRouting_MethodsAndUnknownPaths(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPost, "/connector-card.json", http.StatusMethodNotAllowed},
		{http.MethodHead, "/connector-card.json", http.StatusOK},
		{http.MethodDelete, "/health", http.StatusMethodNotAllowed},
		{http.MethodGet, "/files/uploads", http.StatusMethodNotAllowed},
		{http.MethodGet, "/nope", http.StatusNotFound},
		{http.MethodGet, "/connector-card.json/", http.StatusNotFound},
		{http.MethodGet, "//connector-card.json", http.StatusNotFound},
	} {
		r := e.do(t, c.method, c.path, testKey, nil, nil)
		assert.Equal(t, c.status, r.status, "%s %s", c.method, c.path)
	}
}

func TestNewServer_Timeouts(t *testing.T) {
	s := connector.NewServer(":0", http.NotFoundHandler())
	assert.Equal(t, connector.ServerReadHeaderTimeout, s.ReadHeaderTimeout)
	assert.Equal(t, connector.ServerReadTimeout, s.ReadTimeout)
	assert.Equal(t, connector.ServerIdleTimeout, s.IdleTimeout)
	assert.Equal(t, connector.ServerMaxHeaderBytes, s.MaxHeaderBytes)
	assert.NotZero(t, s.ReadHeaderTimeout)
}

// TestNewHandler_H3_SkillNameMustMatchCard: a /skill.md whose header name
// disagrees with the Card's Skill fails at construction, naming both.
func TestNewHandler_H3_SkillNameMustMatchCard(t *testing.T) {
	card := testCard()
	_, err := connector.NewHandler(connector.HandlerConfig{Card: card, APIKey: "k", Markdown: []byte("---\nname: connector-im-other\n---\n# Other\n")})
	require.ErrorContains(t, err, `"connector-im-other"`)
	require.ErrorContains(t, err, `"`+protocol.SkillName(card.ConnectorCardID)+`"`)
	_, err = connector.NewHandler(connector.HandlerConfig{Card: card, APIKey: "k", Markdown: []byte("# no header\n")})
	require.ErrorContains(t, err, "no header")
	_, err = connector.NewHandler(connector.HandlerConfig{Card: card, APIKey: "k", Markdown: []byte("---\nname: " + protocol.SkillName(card.ConnectorCardID) + "\n---\n")})
	require.NoError(t, err)
}
