package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/sim"
)

// lockedBuffer collects output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestConsole_Security_APIKeyNeverLogged runs the console with -api-key and
// debug logging (-v) against the simulator, also logging at debug: a text
// message, a file line, an attachment uploaded with the key, a resent
// final, /health with the right and a wrong key, a data-plane dial with a
// wrong key, and a clean shutdown. Every byte either side wrote (stdout,
// stderr, the simulator's event log and its slog output) is then searched
// for the key, raw and in the encodings a log might use.
func TestConsole_Security_APIKeyNeverLogged(t *testing.T) {
	raw := make([]byte, 18)
	_, _ = rand.Read(raw)
	key := "sk-live-" + hex.EncodeToString(raw)
	wrong := key[:len(key)-4] + "beef"

	var out lockedBuffer
	cmd := exec.Command(binary, "-addr", "127.0.0.1:0", "-json", "-v", "-api-key", key, "-store", t.TempDir())
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rd := bufio.NewReader(stderr)
	var url string
	for url == "" { // -v may log before the listening line
		line, err := rd.ReadString('\n')
		require.NoError(t, err, "stderr so far: %s", out.String())
		_, _ = out.Write([]byte(line))
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on "); ok {
			url = u
		}
	}
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = io.Copy(&out, rd) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = sim.Start(ctx, sim.Config{Connector: url, APIKey: wrong})
	require.Error(t, err, "a wrong key is refused")
	attach := filepath.Join(t.TempDir(), "report.txt")
	require.NoError(t, os.WriteFile(attach, []byte("attached"), 0o600))
	agent, err := sim.Start(ctx, sim.Config{
		Connector: url, APIKey: key, Attach: attach, Log: &out,
		Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	for _, k := range []string{key, wrong, ""} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		require.NoError(t, err)
		if k != "" {
			req.Header.Set("Authorization", "Bearer "+k)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		_, _ = out.Write(body)
	}
	notes := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("file body"), 0o600))
	_, err = io.WriteString(stdin, "hello with a key\n/file "+notes+"\n")
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), `"event":"final"`) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling a subprocess's output, not timing it
	}
	require.Equal(t, 2, strings.Count(out.String(), `"event":"final"`), "output: %s", out.String())
	agent.Wait()
	_, err = agent.Resend(ctx, agent.ChannelID(), agent.Finals()[0])
	require.NoError(t, err)
	require.NoError(t, agent.Close())
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	<-copied
	_ = cmd.Wait()
	http.DefaultClient.CloseIdleConnections()

	all := out.String()
	require.Greater(t, strings.Count(all, "\n"), 50, "debug logging ran, so the search means something")
	require.Contains(t, all, "level=DEBUG")
	for name, form := range map[string]string{
		"raw":       key,
		"wrong key": wrong,
		"base64":    base64.StdEncoding.EncodeToString([]byte(key)),
		"body":      key[8:],
	} {
		for i, line := range strings.Split(all, "\n") {
			if strings.Contains(line, form) {
				t.Errorf("the API key (%s) appears in output line %d: %.200s", name, i+1, line)
			}
		}
	}
}
