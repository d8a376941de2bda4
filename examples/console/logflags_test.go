package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
		if strings.HasPrefix(sc.Text(), "listening on ") {
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
