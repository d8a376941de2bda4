package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/internal/testwait"
)

// stateEnv passes the parent test's state directory to the child that
// runs main (cmdtest.Main runs the test again in the child, which exits
// without the cleanup a t.TempDir of its own would need).
const stateEnv = "MATRIX_TEST_STATE_DIR"

// stateDir is the test's state directory, the parent's in the child.
func stateDir(t *testing.T) string {
	if dir := os.Getenv(stateEnv); dir != "" {
		return dir
	}
	return t.TempDir()
}

// launch runs the bridge as cmd (from cmdtest.Main) with state in dir,
// and reports whether it started serving, with what it wrote to stderr
// until then (or until it exited).
func launch(t *testing.T, cmd *exec.Cmd, dir string, env ...string) (bool, string) {
	t.Helper()
	cmd.Env = append(cmd.Env, append([]string{cmdflags.KeyEnv + "=", stateEnv + "=" + dir}, env...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type result struct {
		started bool
		said    string
	}
	done := make(chan result, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var said []string
		for sc.Scan() {
			said = append(said, sc.Text())
			if strings.HasPrefix(sc.Text(), "matrix: listening on ") {
				done <- result{true, strings.Join(said, "\n")}
				for sc.Scan() { // keep stderr drained
				}
				return
			}
		}
		done <- result{false, strings.Join(said, "\n")}
	}()
	r := testwait.Recv(t, (<-chan result)(done), 30*time.Second)
	return r.started, r.said
}

// TestAPIKey_W1_ShortKeyRefused: a key under 128 bits (22 characters) is
// refused at start unless -allow-weak-key says the run is a test.
func TestAPIKey_W1_ShortKeyRefused(t *testing.T) {
	dir := stateDir(t)
	cmd := cmdtest.Main(t, "matrix-connector", main, "-listen", "127.0.0.1:0", "-state", dir)
	started, said := launch(t, cmd, dir, cmdflags.KeyEnv+"=k")
	require.False(t, started, said)
	require.Contains(t, said, "under 128 bits")
}

// TestAPIKey_W1_WeakKeyForTests: -allow-weak-key accepts the short key.
func TestAPIKey_W1_WeakKeyForTests(t *testing.T) {
	dir := stateDir(t)
	cmd := cmdtest.Main(t, "matrix-connector", main, "-listen", "127.0.0.1:0", "-state", dir, "-allow-weak-key")
	started, said := launch(t, cmd, dir, cmdflags.KeyEnv+"=k")
	require.True(t, started, said)
}

// TestAPIKey_W1_FromFile: the key can come from a file (a container
// secret), with no environment variable set.
func TestAPIKey_W1_FromFile(t *testing.T) {
	dir := stateDir(t)
	file := filepath.Join(dir, "api-key")
	cmd := cmdtest.Main(t, "matrix-connector", main, "-listen", "127.0.0.1:0", "-state", dir, "-api-key-file", file)
	require.NoError(t, os.WriteFile(file, []byte("k3y-from-a-secret-0123456789abcdef\n"), 0o600))
	started, said := launch(t, cmd, dir)
	require.True(t, started, said)
}

// TestAPIKey_KeyFileReloadedOnSIGHUP: as -api-key-file's usage says, a
// SIGHUP reads the key file again: the new key is accepted on /health,
// the old one still within its grace (connector.APIKeyGrace), a wrong
// one is not, and the bridge keeps serving. Before, the bridges never
// subscribed to SIGHUP, so it ended them.
func TestAPIKey_KeyFileReloadedOnSIGHUP(t *testing.T) {
	const oldKey, newKey = "Vq7Lx2Pz9Wd4-Rk8Mt3Hn6Bc", "Jw4Xs9Fq2Lm7-Tz5Pc8Kd3Rv"
	dir := stateDir(t)
	file := filepath.Join(dir, "api-key")
	cmd := cmdtest.Main(t, "matrix-connector", main, "-listen", "127.0.0.1:0", "-state", dir, "-api-key-file", file, "-log-format", "json")
	require.NoError(t, os.WriteFile(file, []byte(oldKey+"\n"), 0o600))
	cmd.Env = append(cmd.Env, cmdflags.KeyEnv+"=", cmdflags.KeyEnv+"_FILE=", cmdflags.MetricsEnv+"=", stateEnv+"="+dir)
	lines := cmdtest.StartJSONLines(t, cmd)
	base := "http://" + lines.Next(t, "matrix: listening on ").Obj["addr"].(string)
	require.Equal(t, http.StatusOK, cmdtest.Status(t, base+"/health", oldKey))
	require.Equal(t, http.StatusUnauthorized, cmdtest.Status(t, base+"/health", newKey))

	require.NoError(t, os.WriteFile(file, []byte(newKey+"\n"), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	lines.Next(t, "SIGHUP: the API key was reloaded")
	for bearer, want := range map[string]int{newKey: http.StatusOK, oldKey: http.StatusOK, "wrong-" + newKey: http.StatusUnauthorized} {
		require.Equal(t, want, cmdtest.Status(t, base+"/health", bearer), "/health with %q", bearer)
	}
}
