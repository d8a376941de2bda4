package main

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/sim"
)

// TestLogFormatJSON_EveryLineParses: with -log-format json every stderr
// line of a whole run — the start line, the kit's debug lines and the
// sign-in warnings (no XMPP server), listening, monitoring, an xAgent's
// channel, the stop — is one JSON object. The start line names the
// version and the settings, and no line holds the API key, the metrics
// token or the XMPP password.
func TestLogFormatJSON_EveryLineParses(t *testing.T) {
	const token, password = "xmpp-json-scraper-token-0123456789", "xmpp-json-password-0123456789"
	dir := stateDir(t)
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-listen", "127.0.0.1:0", "-state", dir,
		"-jid", "bot@localhost", "-to", "alice@localhost", "-server", "127.0.0.1:1",
		"-log-format", "json", "-v", "-metrics-addr", "127.0.0.1:0",
		"-file-host", "127.0.0.1:5280,upload.localhost", "-file-host", "files.localhost:8443", "-private-file-hosts")
	cmd.Env = append(cmd.Env, cmdflags.KeyEnv+"="+metricsKey, cmdflags.MetricsEnv+"="+token, "XMPP_PASSWORD="+password, stateEnv+"="+dir)
	lines := cmdtest.StartJSONLines(t, cmd)
	start := lines.Next(t, "xmpp: starting")
	require.Contains(t, start.Obj["version"], "xmpp ")
	for k, want := range map[string]any{
		"jid": "bot@localhost", "to": "alice@localhost", "server": "127.0.0.1:1", "metrics_addr": "127.0.0.1:0",
		"file_hosts": "127.0.0.1:5280,upload.localhost,files.localhost:8443", "private_file_hosts": true,
		"api_key": "set", "metrics_token": "set", "log_level": "debug", "state": dir,
	} {
		require.Equal(t, want, start.Obj[k], "the start line's %s", k)
	}
	monitor := lines.Next(t, "xmpp: monitoring on ").Obj["url"].(string)
	base := "http://" + lines.Next(t, "xmpp: listening on ").Obj["addr"].(string)
	require.Equal(t, 200, cmdtest.MetricsStatus(t, monitor, token))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: base, APIKey: metricsKey})
	require.NoError(t, err)
	require.NoError(t, agent.Close())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	lines.Next(t, "xmpp: stopping")
	stopped := lines.Next(t, "xmpp: stopped: ")
	require.Contains(t, stopped.Obj, "cut")
	all := lines.Rest(t, metricsKey, token, password)
	require.NoError(t, cmd.Wait())
	var debug bool
	for _, l := range all {
		debug = debug || l.Obj["level"] == "DEBUG"
	}
	require.True(t, debug, "no kit debug line: the run logged only the command's own lines")
}

// TestLogFormatJSON_ErrorIsAnObject: a start that fails (no API key)
// says why in one JSON object too, and exits 1.
func TestLogFormatJSON_ErrorIsAnObject(t *testing.T) {
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-log-format", "json", "-jid", "bot@localhost", "-to", "alice@localhost")
	cmd.Env = append(cmd.Env, cmdflags.KeyEnv+"=", cmdflags.KeyEnv+"_FILE=")
	all := cmdtest.StartJSONLines(t, cmd).Rest(t)
	err := cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 1, exit.ExitCode())
	require.Len(t, all, 1)
	require.NotNil(t, all[0].Obj, "not a JSON object: %q", all[0].Raw)
	require.Equal(t, "ERROR", all[0].Obj["level"])
	require.Contains(t, all[0].Obj["msg"], "xmpp: no API key")
}
