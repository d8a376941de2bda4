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
// /dev/zero ends the console at once with an error saying it is no
// regular file, its peak RSS within 50 MiB of a -version run's. Before,
// the whole device was read: 0.9–2 GB of RSS in 3 s. The baseline is
// measured beside it because Linux starts a child with the parent's
// memory (vfork) and counts the parent's peak in the child's maxrss.
func TestConsole_KeyFileDevZeroRefusedSmall(t *testing.T) {
	peak := func(args ...string) (int64, string, error) {
		cmd := exec.Command(binary, args...)
		out, err := cmd.CombinedOutput()
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		require.True(t, ok)
		return ru.Maxrss << 10, string(out), err // KiB on Linux
	}
	base, out, err := peak("-version")
	require.NoError(t, err, "%s", out)
	rss, out, err := peak("-addr", "127.0.0.1:0", "-api-key-file", "/dev/zero")
	require.Error(t, err, "%s", out)
	require.Contains(t, out, "no regular file")
	t.Logf("peak RSS %.1f MiB (-version: %.1f MiB)", float64(rss)/(1<<20), float64(base)/(1<<20))
	require.Less(t, rss-base, int64(50<<20))
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
