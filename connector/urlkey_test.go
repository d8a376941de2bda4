package connector_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
)

// TestFiles_T3_URLKeyStableAcrossHandlers: a download URL signed by one
// Handler verifies on a second one built from the same secret — a
// restarted process, another replica on the same FileStore — whether the
// secret is the API key (the default) or an explicit HandlerConfig.URLKey, and
// not on one built from another secret. Without either, each Handler's key
// is its own.
func TestFiles_T3_URLKeyStableAcrossHandlers(t *testing.T) {
	urlKey := bytes.Repeat([]byte{7}, connector.MinURLKeyBytes)
	otherKey := bytes.Repeat([]byte{8}, connector.MinURLKeyBytes)
	for _, tc := range []struct {
		name         string
		first, again func(*connector.HandlerConfig)
		status       int
	}{
		{"same_api_key", nil, nil, http.StatusOK},
		{"another_api_key", nil, func(c *connector.HandlerConfig) { c.APIKey = testKey + "-rotated" }, http.StatusForbidden},
		{"same_url_key_other_api_keys",
			func(c *connector.HandlerConfig) { c.URLKey = urlKey },
			func(c *connector.HandlerConfig) { c.URLKey, c.APIKey = urlKey, testKey+"-rotated" }, http.StatusOK},
		{"another_url_key",
			func(c *connector.HandlerConfig) { c.URLKey = urlKey },
			func(c *connector.HandlerConfig) { c.URLKey = otherKey }, http.StatusForbidden},
		{"url_key_is_not_the_api_key",
			func(c *connector.HandlerConfig) { c.URLKey = urlKey }, nil, http.StatusForbidden},
		{"no_key_at_all",
			func(c *connector.HandlerConfig) { c.APIKey, c.Card.Security = "", nil },
			func(c *connector.HandlerConfig) { c.APIKey, c.Card.Security = "", nil }, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
			with := func(mod func(*connector.HandlerConfig)) func(*connector.HandlerConfig) {
				return func(c *connector.HandlerConfig) {
					c.Files = files
					if mod != nil {
						mod(c)
					}
				}
			}
			first, again := newEnv(t, with(tc.first)), newEnv(t, with(tc.again))
			f, err := first.h.OfferFile(context.Background(), "cch_1", "a.txt", "text/plain", bytes.NewReader([]byte("hello")))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, first.do(t, http.MethodGet, f.DownloadURL, "", nil, nil).status, "on the Handler that signed it")
			r := again.do(t, http.MethodGet, f.DownloadURL, "", nil, nil)
			require.Equal(t, tc.status, r.status, "on the second Handler")
			if tc.status == http.StatusOK {
				assert.Equal(t, "hello", string(r.body))
			}
		})
	}
}

// TestHandler_T3_ShortURLKeyRefused: a URLKey under MinURLKeyBytes fails
// NewHandler with an error naming the field, instead of signing with a
// guessable key.
func TestHandler_T3_ShortURLKeyRefused(t *testing.T) {
	for _, n := range []int{0, 1, connector.MinURLKeyBytes - 1} {
		_, err := connector.NewHandler(connector.HandlerConfig{Card: testCard(), APIKey: testKey, URLKey: make([]byte, n)})
		require.Error(t, err, "%d bytes", n)
		assert.Contains(t, err.Error(), "URLKey")
	}
	_, err := connector.NewHandler(connector.HandlerConfig{Card: testCard(), APIKey: testKey, URLKey: make([]byte, connector.MinURLKeyBytes)})
	require.NoError(t, err)
}
