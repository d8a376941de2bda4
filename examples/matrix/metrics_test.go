package main

import (
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

// TestMetrics_ServedApartFromTheKey: a scraper needs no API key, and
// xAgent's key never opens /metrics (cmdtest.CheckMetricsApart: open on
// -metrics-addr, with the kit's series before any room is bound; a token
// from -metrics-token-file or $XAGENT_METRICS_TOKEN opens it on both
// addresses, and only it).
func TestMetrics_ServedApartFromTheKey(t *testing.T) {
	cmdtest.CheckMetricsApart(t, func(t *testing.T, env []string, args ...string) (string, string) {
		return serving(t, stateDir(t), env, args...)
	}, metricsKey, "matrix-scraper-token-0123456789", func(t *testing.T, _ string, open map[string]float64) {
		require.Equal(t, 0.0, open["imv2_listener_failures_total"])
	})
}
