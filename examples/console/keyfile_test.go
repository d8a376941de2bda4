//go:build unix

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
)

// TestConsole_KeyFileDevZeroRefusedSmall (issue 37): -api-key-file
// /dev/zero ends the console at once with an error saying a key file
// holds one line, its peak RSS under 50 MiB. Before, the whole device was
// read: 0.9–2 GB of RSS in 3 s.
func TestConsole_KeyFileDevZeroRefusedSmall(t *testing.T) {
	cmd := exec.Command(binary, "-addr", "127.0.0.1:0", "-api-key-file", "/dev/zero")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "longer than 4096 bytes: a key file holds one line")
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	require.True(t, ok)
	rss := ru.Maxrss << 10 // KiB on Linux
	t.Logf("peak RSS %.1f MiB", float64(rss)/(1<<20))
	require.Less(t, rss, int64(50<<20))
}

// launchKeyFile starts the console on a key file and returns its base URL
// and the lines it printed before "listening on"; the rest of stderr is
// sent on later.
func launchKeyFile(t *testing.T, file string) (*exec.Cmd, string, string, <-chan string) {
	t.Helper()
	cmd := exec.Command(binary, "-addr", "127.0.0.1:0", "-api-key-file", file)
	cmd.Env = append(os.Environ(), "XAGENT_API_KEY=")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	var said []string
	later := make(chan string, 64)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go func() {
				for sc.Scan() {
					select {
					case later <- sc.Text():
					default:
					}
				}
			}()
			return cmd, url, strings.Join(said, "\n"), later
		}
		said = append(said, sc.Text())
	}
	t.Fatalf("the console exited: %s", strings.Join(said, "\n"))
	return nil, "", "", nil
}

// TestConsole_KeyFileReloadedOnSIGHUP (issue 37), over loopback: the
// console serves the key of its file (mode 0644: a warning is logged);
// the file is rewritten with a new key and the console gets SIGHUP; the
// new key is then accepted on /health and the old one still is (its
// grace, connector.APIKeyGrace); a wrong key is not. Before, the file was
// read once at start and a 0644 file was taken silently.
func TestConsole_KeyFileReloadedOnSIGHUP(t *testing.T) {
	const oldKey, newKey = "Vq7Lx2Pz9Wd4-Rk8Mt3Hn6Bc", "Jw4Xs9Fq2Lm7-Tz5Pc8Kd3Rv"
	file := filepath.Join(t.TempDir(), "api-key")
	require.NoError(t, os.WriteFile(file, []byte(oldKey+"\n"), 0o600))
	require.NoError(t, os.Chmod(file, 0o644))
	cmd, url, said, later := launchKeyFile(t, file)
	require.Contains(t, said, "readable by its group or others")
	require.Equal(t, http.StatusOK, healthStatus(t, url, oldKey))
	require.Equal(t, http.StatusUnauthorized, healthStatus(t, url, newKey))

	require.NoError(t, os.WriteFile(file, []byte(newKey+"\n"), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	deadline := time.After(10 * time.Second)
	for reloaded := false; !reloaded; {
		select {
		case l := <-later:
			reloaded = strings.Contains(l, "was reloaded")
		case <-deadline:
			t.Fatal("no reload logged")
		}
	}
	require.Equal(t, http.StatusOK, healthStatus(t, url, newKey))
	require.Equal(t, http.StatusOK, healthStatus(t, url, oldKey), "the old key within its grace")
	require.Equal(t, http.StatusUnauthorized, healthStatus(t, url, "wrong-"+newKey))

	// A file that fails the checks is not taken: the keys stay.
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("a", 40)+"\n"), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	for refused := false; !refused; {
		select {
		case l := <-later:
			refused = strings.Contains(l, "not reloaded")
		case <-deadline:
			t.Fatal("no refusal logged")
		}
	}
	require.Equal(t, http.StatusOK, healthStatus(t, url, newKey))
	require.Equal(t, http.StatusUnauthorized, healthStatus(t, url, strings.Repeat("a", 40)))
}
