package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

// launch starts the console with args and env, and returns its base URL,
// or "" and what it printed when it exited instead.
func launch(t *testing.T, env []string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	var said []string
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go func() { // keep stderr drained
				for sc.Scan() {
				}
			}()
			return url, ""
		}
		said = append(said, sc.Text())
	}
	return "", strings.Join(said, "\n")
}

// healthStatus is the status of GET url/health with the key as bearer.
func healthStatus(t *testing.T, url, key string) int {
	t.Helper()
	return cmdtest.Status(t, url+"/health", key)
}

// TestConsole_W1_APIKeyFromEnvOrFile: the key guarding /health (W1) comes
// from $XAGENT_API_KEY or -api-key-file as well as -api-key, never
// required; a key under 128 bits (22 characters) is refused unless
// -allow-weak-key says the run is a test.
func TestConsole_W1_APIKeyFromEnvOrFile(t *testing.T) {
	const key = "k3y-fr0m-a-Secret-Vq7Lx2Pz9Wd4"
	file := filepath.Join(t.TempDir(), "api-key")
	require.NoError(t, os.WriteFile(file, []byte(key+"\n"), 0o600))
	for name, tc := range map[string]struct {
		env  []string
		args []string
	}{
		"env":  {env: []string{"XAGENT_API_KEY=" + key}},
		"file": {args: []string{"-api-key-file", file}},
		"flag": {args: []string{"-api-key", key}},
	} {
		t.Run(name, func(t *testing.T) {
			url, said := launch(t, tc.env, tc.args...)
			require.NotEmpty(t, url, said)
			require.Equal(t, http.StatusUnauthorized, healthStatus(t, url, "wrong-"+key))
			require.Equal(t, http.StatusOK, healthStatus(t, url, key))
		})
	}

	url, said := launch(t, nil, "-api-key", "short-key")
	require.Empty(t, url, "a 9-character key is refused")
	require.Contains(t, said, "under 128 bits")
	url, said = launch(t, []string{"XAGENT_API_KEY=short-key"}, "-allow-weak-key")
	require.NotEmpty(t, url, "accepted for a test: %s", said)
	require.Equal(t, http.StatusOK, healthStatus(t, url, "short-key"))
}
