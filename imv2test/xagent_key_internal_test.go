package imv2test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/xagentkit/imv2/internal/apikey"
)

// TestXAgentRun_W1_KeyParsedAsTheSDKDoes: the suite's Connector (the one
// an xAgent under test dials) accepts every Authorization header the SDK's
// Connector accepts — the scheme in any case, several spaces — and
// refuses the rest. Before, it compared the header as an exact string and
// refused "bearer K" and "Bearer  K".
func TestXAgentRun_W1_KeyParsedAsTheSDKDoes(t *testing.T) {
	const key = "imv2test-key"
	x := &xagentRun{apiKey: key, key: apikey.New(key)}
	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + key, true},
		{"bearer " + key, true},
		{"BEARER " + key, true},
		{"Bearer  " + key, true},
		{"Bearer " + key + "x", false},
		{"Bearer", false},
		{"Bearer ", false},
		{"Basic " + key, false},
		{"Bearer\t" + key, false},
		{key, false},
		{"", false},
	} {
		r := httptest.NewRequest("GET", "/ws", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		assert.Equal(t, tc.ok, x.keyOK(r), "%q", tc.header)
		assert.Equal(t, apikey.New(key).Allow(tc.header), x.keyOK(r), "%q: the SDK's parser decides", tc.header)
	}
}
