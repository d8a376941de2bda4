package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
)

// The lines naming the addresses the bridge serves on.
var (
	listening  = regexp.MustCompile(`matrix: listening on (\S+) `)
	monitoring = regexp.MustCompile(`(?m)^matrix: monitoring on (\S+)$`)
)

const metricsKey = "matrix-metrics-key-0123456789"

// serving runs the bridge with state in dir, the API key metricsKey and
// env, and returns the base URLs it listens and monitors on (the latter
// "" without -metrics-addr).
func serving(t *testing.T, dir string, env []string, args ...string) (base, monitor string) {
	t.Helper()
	cmd := cmdtest.Main(t, "matrix-connector", main, append([]string{"-listen", "127.0.0.1:0", "-state", dir}, args...)...)
	started, said := launch(t, cmd, dir, append([]string{cmdflags.KeyEnv + "=" + metricsKey, cmdflags.MetricsEnv + "="}, env...)...)
	require.True(t, started, said)
	addr := listening.FindStringSubmatch(said)
	require.NotNil(t, addr, said)
	if m := monitoring.FindStringSubmatch(said); m != nil {
		monitor = m[1]
	}
	return "http://" + addr[1], monitor
}

// scrape is the status of GET base/metrics with bearer ("" sends none).
func scrape(t *testing.T, base, bearer string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestMetrics_ServedApartFromTheKey: a scraper needs no API key. With
// -metrics-addr the Matrix bridge serves /metrics there without a
// credential, in the text format, with the kit's series (store errors,
// connections, channels, send→ack latency, listener failures,
// build_info, Go and process) before any room is bound; on the
// Connector's address xAgent's key does not open /metrics (404).
func TestMetrics_ServedApartFromTheKey(t *testing.T) {
	base, monitor := serving(t, stateDir(t), nil, "-metrics-addr", "127.0.0.1:0")
	require.NotEmpty(t, monitor)
	s := cmdtest.CheckMetrics(t, monitor, "")
	require.Equal(t, 0.0, s["imv2_open_connections"])
	require.Equal(t, 0.0, s["imv2_listener_failures_total"])
	require.Equal(t, http.StatusNotFound, scrape(t, base, metricsKey), "xAgent's key opens /metrics")
	require.Equal(t, http.StatusNotFound, scrape(t, base, ""))
}

// TestMetrics_TokenOpensThem_KeyDoesNot: with a metrics token (from
// -metrics-token-file or $XAGENT_METRICS_TOKEN) the token opens /metrics
// on both addresses, and only it: xAgent's key and no credential get 401.
func TestMetrics_TokenOpensThem_KeyDoesNot(t *testing.T) {
	const token = "matrix-scraper-token-0123456789"
	for _, from := range []string{"file", "env"} {
		t.Run(from, func(t *testing.T) {
			dir := stateDir(t)
			file := filepath.Join(dir, "metrics-token")
			require.NoError(t, os.WriteFile(file, []byte(token+"\n"), 0o600))
			env, args := []string{cmdflags.MetricsEnv + "=" + token}, []string{"-metrics-addr", "127.0.0.1:0"}
			if from == "file" {
				env, args = nil, append(args, "-metrics-token-file", file)
			}
			base, monitor := serving(t, dir, env, args...)
			require.NotEmpty(t, monitor)
			for _, url := range []string{base, monitor} {
				s := cmdtest.CheckMetrics(t, url, token) // 401 without it
				require.Equal(t, 0.0, s["imv2_open_connections"])
				require.Equal(t, http.StatusUnauthorized, scrape(t, url, metricsKey), "xAgent's key opens /metrics on %s", url)
			}
		})
	}
}
