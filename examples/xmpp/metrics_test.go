package main

import (
	"bufio"
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

// listening finds the address the bridge says it listens on.
var listening = regexp.MustCompile(`^xmpp: listening on (\S+) `)

// TestMetrics_ServedBehindTheKey: the XMPP bridge serves /metrics with no
// flag for it, behind its API key, in the text format, with the kit's
// series, while its XMPP server is still out of reach (it redials in the
// background; no server is needed for this).
func TestMetrics_ServedBehindTheKey(t *testing.T) {
	const key = "xmpp-metrics-key-0123456789"
	dir := os.Getenv(stateEnv) // the parent's, in the child (which exits without cleanup)
	if dir == "" {
		dir = t.TempDir()
	}
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-listen", "127.0.0.1:0", "-state", dir,
		"-jid", "bot@localhost", "-to", "alice@localhost", "-server", "127.0.0.1:1")
	cmd.Env = append(cmd.Env, cmdflags.KeyEnv+"="+key, "XMPP_PASSWORD=not-used", stateEnv+"="+dir)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() { // ends when the process is killed at cleanup
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	s := cmdtest.CheckMetrics(t, "http://"+testwait.Recv(t, addr, 30*time.Second), key)
	require.Equal(t, 0.0, s["imv2_open_connections"])
}
