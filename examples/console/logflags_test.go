package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/sim"
)

// startupLog starts the console without an API key and returns the
// stderr lines it wrote before "listening on".
func startupLog(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // kept open: a nil stdin is /dev/null
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		var m struct{ Msg string }
		if strings.HasPrefix(sc.Text(), "listening on ") || json.Unmarshal(sc.Bytes(), &m) == nil && strings.HasPrefix(m.Msg, "listening on ") {
			go func() { // keep stderr drained
				for sc.Scan() {
				}
			}()
			return lines
		}
		lines = append(lines, sc.Text())
	}
	t.Fatalf("no listening line; stderr:\n%s", strings.Join(lines, "\n"))
	return nil
}

// TestConsole_WarnsByDefault: without -v the console still shows its
// warnings (here the kit's: no API key configured); -log-level error
// hides them.
func TestConsole_WarnsByDefault(t *testing.T) {
	t.Parallel()
	lines := strings.Join(startupLog(t), "\n")
	require.Contains(t, lines, "level=WARN")
	require.Contains(t, lines, "no API key configured")
	require.NotContains(t, strings.Join(startupLog(t, "-log-level", "error"), "\n"), "level=WARN")
}

// TestConsole_LogFormatJSON: -log-format json writes each log line as
// one JSON object.
func TestConsole_LogFormatJSON(t *testing.T) {
	t.Parallel()
	lines := startupLog(t, "-log-format", "json")
	require.NotEmpty(t, lines)
	var warned bool
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		warned = warned || (m["level"] == "WARN" && strings.Contains(m["msg"].(string), "no API key configured"))
	}
	require.True(t, warned, "no WARN object about the missing key in %q", lines)
}

// TestConsole_LogFormatJSON_EveryLineParses: with -log-format json every
// stderr line of a whole run — start, listening, the kit's debug lines,
// the monitoring address, the stop — is one JSON object. The start line
// names the version and the settings, and no line holds the API key.
func TestConsole_LogFormatJSON_EveryLineParses(t *testing.T) {
	t.Parallel()
	const key = "console-json-log-key-0123456789"
	cmd := exec.Command(binary, "-addr", "127.0.0.1:0", "-log-format", "json", "-v", "-store", t.TempDir(), "-metrics-addr", "127.0.0.1:0", "-mode", "buffer")
	cmd.Env = append(os.Environ(), "XAGENT_API_KEY="+key)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })

	type line struct {
		raw string
		obj map[string]any
	}
	got := make(chan line, 4096)
	go func() {
		defer close(got)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = nil
			}
			got <- line{sc.Text(), m}
		}
	}()
	var all []line
	next := func(msgPrefix string) line {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-got:
				require.True(t, ok, "stderr ended before %q", msgPrefix)
				all = append(all, l)
				if msg, _ := l.obj["msg"].(string); strings.HasPrefix(msg, msgPrefix) {
					return l
				}
			case <-timeout:
				t.Fatalf("no line %q within 30 s", msgPrefix)
			}
		}
	}
	start := next("console: starting")
	for _, k := range []string{"version", "addr", "mode", "store", "metrics_addr", "shutdown_grace"} {
		require.Contains(t, start.obj, k, "the start line names %s", k)
	}
	require.Contains(t, start.obj["version"], "console ")
	require.Equal(t, "set", start.obj["api_key"], "whether a key is set, not the key")
	url := next("listening on ").obj["url"].(string)
	next("monitoring on ")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: url, APIKey: key})
	require.NoError(t, err)
	defer agent.Close()
	_, err = io.WriteString(stdin, "hello\n")
	require.NoError(t, err)
	require.NoError(t, agent.WaitAcked(ctx, 1)) // a reply shown: the kit logged at debug meanwhile
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	next("console: stopping")
	stopped := next("console: stopped: ")
	require.Contains(t, stopped.obj, "cut")
	for l := range got {
		all = append(all, l)
	}
	require.NoError(t, cmd.Wait())
	require.Greater(t, len(all), 5)
	for _, l := range all {
		require.NotNil(t, l.obj, "not a JSON object: %q", l.raw)
		require.NotContains(t, l.raw, key, "a line holds the API key")
	}
}
