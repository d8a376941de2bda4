package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
)

// listening finds the address the bridge says it listens on.
var listening = regexp.MustCompile(`matrix: listening on (\S+) `)

// TestMetrics_ServedBehindTheKey: the Matrix bridge serves /metrics with
// no flag for it, behind its API key, in the text format, with the kit's
// series (store errors, connections, channels, send→ack latency, listener
// failures, build_info, Go and process) before any room is bound.
func TestMetrics_ServedBehindTheKey(t *testing.T) {
	const key = "matrix-metrics-key-0123456789"
	dir := stateDir(t)
	cmd := cmdtest.Main(t, "matrix-connector", main, "-listen", "127.0.0.1:0", "-state", dir)
	started, said := launch(t, cmd, dir, cmdflags.KeyEnv+"="+key)
	require.True(t, started, said)
	addr := listening.FindStringSubmatch(said)
	require.NotNil(t, addr, said)
	s := cmdtest.CheckMetrics(t, "http://"+addr[1], key)
	require.Equal(t, 0.0, s["imv2_open_connections"])
	require.Equal(t, 0.0, s["imv2_listener_failures_total"])
}
