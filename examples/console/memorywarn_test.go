package main

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/internal/testwait"
)

// TestConsole_S8_WarnsOfMemoryStateAtStart: without -store the console
// says, right after its "listening on" line, that its state is in memory
// and names -store, once (the kit does not warn too); two consoles
// started side by side both run (no default state file to fight over).
func TestConsole_S8_WarnsOfMemoryStateAtStart(t *testing.T) {
	t.Parallel()
	for range 2 {
		cmd := exec.Command(binary, "-addr", "127.0.0.1:0")
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		stdin, err := cmd.StdinPipe() // kept open: a nil stdin is /dev/null
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
		lines := make(chan string, 16)
		go func() { // ends when the process is killed at cleanup
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		var before []string // log lines (the kit's own warnings) come first
		line := testwait.Recv(t, (<-chan string)(lines), 20*time.Second)
		for strings.HasPrefix(line, "time=") {
			before = append(before, line)
			line = testwait.Recv(t, (<-chan string)(lines), 20*time.Second)
		}
		require.True(t, strings.HasPrefix(line, "listening on "), line)
		line = testwait.Recv(t, (<-chan string)(lines), 20*time.Second)
		require.Contains(t, line, "state is in memory")
		require.Contains(t, line, "-store DIR")
		for _, l := range before {
			require.NotContains(t, l, "in memory", "warned once, by the console, not by the kit too")
		}
	}
}
