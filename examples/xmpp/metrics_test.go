package main

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/internal/testwait"
)

// stateEnv passes the parent test's state directory to the child that
// runs main.
const stateEnv = "XMPP_TEST_STATE_DIR"

// The lines naming the addresses the bridge serves on.
var (
	listening  = regexp.MustCompile(`^xmpp: listening on (\S+) `)
	monitoring = regexp.MustCompile(`^xmpp: monitoring on (\S+)$`)
)

const metricsKey = "xmpp-metrics-key-0123456789"

// stateDir is the test's state directory, the parent's in the child
// (which exits without the cleanup a t.TempDir of its own would need).
func stateDir(t *testing.T) string {
	if dir := os.Getenv(stateEnv); dir != "" {
		return dir
	}
	return t.TempDir()
}

// serving runs the bridge (cmdtest.Main) with state in dir, the API key metricsKey,
// the environment env and args, its XMPP server out of reach (it redials
// in the background; no server is needed for its HTTP side), and returns
// the base URLs it says it listens on and, with -metrics-addr, monitors
// on ("" without).
func serving(t *testing.T, dir string, env []string, args ...string) (base, monitor string) {
	t.Helper()
	cmd := cmdtest.Main(t, "xmpp-connector", main, append([]string{"-listen", "127.0.0.1:0", "-state", dir,
		"-jid", "bot@localhost", "-to", "alice@localhost", "-server", "127.0.0.1:1"}, args...)...)
	cmd.Env = append(cmd.Env, append([]string{cmdflags.KeyEnv + "=" + metricsKey, cmdflags.MetricsEnv + "=", "XMPP_PASSWORD=not-used", stateEnv + "=" + dir}, env...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addrs := make(chan [2]string, 1)
	wantMonitor := false
	for _, a := range args {
		wantMonitor = wantMonitor || a == "-metrics-addr"
	}
	go func() { // ends when the process is killed at cleanup
		sc := bufio.NewScanner(stderr)
		var got [2]string
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				got[0] = "http://" + m[1]
			}
			if m := monitoring.FindStringSubmatch(sc.Text()); m != nil {
				got[1] = m[1]
			}
			if got[0] != "" && (got[1] != "" || !wantMonitor) {
				addrs <- got
				got = [2]string{"x", "x"} // once
			}
		}
	}()
	got := testwait.Recv(t, (<-chan [2]string)(addrs), 30*time.Second)
	return got[0], got[1]
}

// TestMetrics_ServedApartFromTheKey: a scraper needs no API key, and
// xAgent's key never opens /metrics (cmdtest.CheckMetricsApart: open on
// -metrics-addr; a token from -metrics-token-file or
// $XAGENT_METRICS_TOKEN opens it on both addresses, and only it). The
// monitoring address also serves /readyz (503: the XMPP server is out of
// reach) and not the data plane.
func TestMetrics_ServedApartFromTheKey(t *testing.T) {
	cmdtest.CheckMetricsApart(t, func(t *testing.T, env []string, args ...string) (string, string) {
		return serving(t, stateDir(t), env, args...)
	}, metricsKey, "xmpp-scraper-token-0123456789", func(t *testing.T, monitor string, _ map[string]float64) {
		resp, err := http.Get(monitor + "/readyz")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "ready without its XMPP server")
		resp, err = http.Get(monitor + "/ws")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "the monitoring address serves the data plane")
	})
}
