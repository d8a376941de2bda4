package connector_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
)

// TestKit_W1_SetAPIKeyKeepsTheOldKeyForItsGrace (issue 37), over
// loopback: after SetAPIKey the new key opens /health and /ws, the old one
// still does until APIKeyGrace has passed on the kit's clock, then is
// refused. A Connector started without a key gets none by a rotation.
func TestKit_W1_SetAPIKeyKeepsTheOldKeyForItsGrace(t *testing.T) {
	const newKey = "Jw4Xs9Fq2Lm7-Tz5Pc8Kd3Rv"
	clk := fakeclock.New(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	k, url := startKit(t, newPretend(0), testKey, connector.Options{Advanced: connector.Advanced{Clock: clk}})
	health := func(key string) int {
		req, err := http.NewRequest(http.MethodGet, url+"/health", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	dial := func(key string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, APIKey: key, Target: inbound(make(chan imv2.ChatMessage, 1))})
		if err == nil {
			_ = cli.Close()
		}
		return err
	}
	require.Equal(t, http.StatusUnauthorized, health(newKey))
	require.NoError(t, k.SetAPIKey(newKey))
	require.Equal(t, http.StatusOK, health(newKey))
	require.Equal(t, http.StatusOK, health(testKey), "the old key within its grace")
	require.NoError(t, dial(newKey))
	require.NoError(t, dial(testKey))

	clk.Advance(connector.APIKeyGrace)
	require.Equal(t, http.StatusUnauthorized, health(testKey), "the old key past its grace")
	require.Equal(t, http.StatusOK, health(newKey))
	require.Error(t, dial(testKey))
	require.Error(t, k.SetAPIKey(""), "an empty key")

	open, _ := startKit(t, newPretend(0), "", connector.Options{})
	require.Error(t, open.SetAPIKey(newKey), "no key at start: a reload does not turn the check on")
}
