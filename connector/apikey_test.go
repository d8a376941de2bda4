package connector_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
)

// TestAPIKey_W1_OneParserForHTTPAndWS: the HTTP kit and the data plane
// decide every Authorization header alike. Before they shared a parser the
// kit accepted "Bearer  K" (two spaces) while the data plane refused it.
func TestAPIKey_W1_OneParserForHTTPAndWS(t *testing.T) {
	e := newEnv(t, nil)
	ws, err := dataplane.NewServer(dataplane.ServerConfig{
		Card:   testCard(),
		APIKey: testKey,
		NewTarget: func(string) imv2.Target {
			return imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
		},
	})
	require.NoError(t, err)
	dp := httptest.NewServer(ws)
	t.Cleanup(func() { dp.Close(); ws.Close() })

	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + testKey, true},
		{"Bearer  " + testKey, true}, // 1*SP (RFC 9110 §11.4)
		{"bearer " + testKey, true},
		{"Bearer\t" + testKey, false},
		{"Bearer" + testKey, false},
		{"Bearer " + testKey + "x", false},
		{"Basic " + testKey, false},
		{"Bearer ", false},
		{"", false},
	} {
		hdr := map[string]string{}
		if tc.header != "" {
			hdr["Authorization"] = tc.header
		}
		kit := e.do(t, http.MethodGet, "/health", "", hdr, nil).status
		h := http.Header{}
		if tc.header != "" {
			h.Set("Authorization", tc.header)
		}
		d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
		c, res, _ := d.Dial("ws"+strings.TrimPrefix(dp.URL, "http")+"/ws", h)
		require.NotNil(t, res, "%q", tc.header)
		_ = res.Body.Close()
		if c != nil {
			_ = c.Close()
		}
		wantKit, wantWS := http.StatusUnauthorized, http.StatusUnauthorized
		if tc.ok {
			wantKit, wantWS = http.StatusOK, http.StatusSwitchingProtocols
		}
		assert.Equal(t, wantKit, kit, "HTTP kit, %q", tc.header)
		assert.Equal(t, wantWS, res.StatusCode, "data plane, %q", tc.header)
	}
}
