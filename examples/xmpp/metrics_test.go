package main

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
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
// -metrics-addr the XMPP bridge serves /metrics there without a
// credential, in the text format, with the kit's series, and /readyz
// (503: the XMPP server is out of reach); on the Connector's address
// xAgent's key does not open /metrics (404).
func TestMetrics_ServedApartFromTheKey(t *testing.T) {
	base, monitor := serving(t, stateDir(t), nil, "-metrics-addr", "127.0.0.1:0")
	s := cmdtest.CheckMetrics(t, monitor, "")
	require.Equal(t, 0.0, s["imv2_open_connections"])
	require.Equal(t, http.StatusNotFound, scrape(t, base, metricsKey), "xAgent's key opens /metrics")
	require.Equal(t, http.StatusNotFound, scrape(t, base, ""))
	resp, err := http.Get(monitor + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "ready without its XMPP server")
	resp, err = http.Get(monitor + "/ws")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the monitoring address serves the data plane")
}

// TestMetrics_TokenOpensThem_KeyDoesNot: with a metrics token (from
// -metrics-token-file or $XAGENT_METRICS_TOKEN) the token opens /metrics
// on both addresses, and only it: xAgent's key and no credential get 401.
func TestMetrics_TokenOpensThem_KeyDoesNot(t *testing.T) {
	const token = "xmpp-scraper-token-0123456789"
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
			for _, url := range []string{base, monitor} {
				s := cmdtest.CheckMetrics(t, url, token) // 401 without it
				require.Equal(t, 0.0, s["imv2_open_connections"])
				require.Equal(t, http.StatusUnauthorized, scrape(t, url, metricsKey), "xAgent's key opens /metrics on %s", url)
			}
		})
	}
}
