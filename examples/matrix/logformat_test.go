package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/sim"
)

// TestLogFormatJSON_EveryLineParses: with -log-format json every stderr
// line of a run — the start line, monitoring, listening, the kit's debug
// lines of an xAgent's channel (refused: no room is bound), the stop — is
// one JSON object. The start line names the version and the settings,
// and no line holds the API key or the metrics token. (No homeserver: the
// run's Matrix side is e2e's, with Dendrite.)
func TestLogFormatJSON_EveryLineParses(t *testing.T) {
	const token = "matrix-json-scraper-token-0123456789"
	dir := stateDir(t)
	cmd := cmdtest.Main(t, "matrix-connector", main, "-listen", "127.0.0.1:0", "-state", dir,
		"-log-format", "json", "-v", "-metrics-addr", "127.0.0.1:0", "-private-homeservers")
	cmd.Env = append(cmd.Env, cmdflags.KeyEnv+"="+metricsKey, cmdflags.MetricsEnv+"="+token, stateEnv+"="+dir)
	lines := cmdtest.StartJSONLines(t, cmd)
	start := lines.Next(t, "matrix: starting")
	require.Contains(t, start.Obj["version"], "matrix ")
	for k, want := range map[string]any{
		"listen": "127.0.0.1:0", "state": dir, "private_homeservers": true, "metrics_addr": "127.0.0.1:0",
		"api_key": "set", "metrics_token": "set", "log_level": "debug",
	} {
		require.Equal(t, want, start.Obj[k], "the start line's %s", k)
	}
	monitor := lines.Next(t, "matrix: monitoring on ").Obj["url"].(string)
	base := "http://" + lines.Next(t, "matrix: listening on ").Obj["addr"].(string)
	require.Equal(t, 200, cmdtest.MetricsStatus(t, monitor, token))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: base, APIKey: metricsKey})
	if err == nil { // the channel needs a sign-in: opened or not, the kit logged
		_ = agent.Close()
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	lines.Next(t, "matrix: stopping")
	stopped := lines.Next(t, "matrix: stopped: ")
	require.Contains(t, stopped.Obj, "cut")
	all := lines.Rest(t, metricsKey, token)
	require.NoError(t, cmd.Wait())
	var debug bool
	for _, l := range all {
		debug = debug || l.Obj["level"] == "DEBUG"
	}
	require.True(t, debug, "no kit debug line: the run logged only the command's own lines")
}
