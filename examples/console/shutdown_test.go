package main

import (
	"bufio"
	"bytes"
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
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/sim"
)

// TestShutdown_S8_SIGTERMDuringSlowPostDrainsTheFinal: SIGTERM arrives
// while the console is posting a final (its stdout, the "IM platform", is
// a pipe nobody reads: the write blocks). The console says it is stopping,
// lets the post finish once the pipe is read, logs the one line of what
// it drained (1 finished) and exits 0. Restarted on the same -store, the
// final is settled with xAgent — acked before the close frame, or its
// resend answered duplicate — and it was shown exactly once across both
// runs, never refused delivery_outcome_unknown.
func TestShutdown_S8_SIGTERMDuringSlowPostDrainsTheFinal(t *testing.T) {
	store, addr := t.TempDir(), freeAddr(t)
	cmd, outR, waitLine := startPiped(t, nil, "-addr", addr, "-json", "-mode", "buffer", "-store", store)
	url := strings.TrimPrefix(waitLine("listening on "), "listening on ")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: url, Options: &imv2.Options{RetryMax: time.Second}})
	require.NoError(t, err)
	defer agent.Close()
	ch := agent.ChannelID()

	// Far more than a pipe holds: the printer's one write of the final's
	// JSON line blocks until the test reads it.
	text := strings.Repeat("slow platform ", 300<<10/14)
	require.NoError(t, agent.Reply(ctx, ch, text))
	var out bytes.Buffer
	readUntilFinal(t, outR, &out)
	// The post is in progress now, and stays so until the pipe is read.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waitLine("console: stopping")
	_, err = io.Copy(&out, outR) // the platform answers: the post finishes
	require.NoError(t, err)
	stopped := waitLine("console: stopped: ")
	require.NoError(t, cmd.Wait(), "exit 0")
	require.Contains(t, stopped, "1 finals finished, 0 cut off")

	var shown int
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e consolebridge.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		if e.Event == "final" && e.Text != nil && *e.Text == text {
			shown++
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 1, shown, "the final in flight was shown, once")

	// Restarted: whatever xAgent still has pending is settled, and nothing
	// of it is shown again.
	p2 := start(t, "-addr", addr, "-store", store)
	require.NoError(t, agent.WaitAcked(ctx, 1), "the final got its terminal ack, not a refusal")
	require.NoError(t, agent.Reply(ctx, ch, "after the restart"))
	after := p2.until(t, func(e consolebridge.Event) bool { return e.Event == "final" })
	for _, e := range after {
		if e.Event == "final" {
			require.Equal(t, "after the restart", *e.Text, "S8: the drained final is not shown again")
		}
	}
}

// TestShutdown_S8_SIGTERMWhilePostIgnoresItsContextEndsInTime: SIGTERM
// while the console's post of a final blocks for good (its stdout, the
// "IM platform", is a pipe nobody reads; a write ignores any context).
// The console exits 0 within its grace plus a second, counting the final
// as cut off. Restarted on the same -store, the cut-off final's claim is
// settled: xAgent's resend is reported unknown (or answered duplicate),
// never shown again.
func TestShutdown_S8_SIGTERMWhilePostIgnoresItsContextEndsInTime(t *testing.T) {
	const grace = 2 * time.Second
	store, addr := t.TempDir(), freeAddr(t)
	// The binary has -race, whose runtime sleeps 1 s at exit by default;
	// the bound is the console's, not the race detector's.
	cmd, outR, waitLine := startPiped(t, []string{"GORACE=atexit_sleep_ms=0"},
		"-addr", addr, "-json", "-mode", "buffer", "-store", store, "-shutdown-grace", grace.String())
	url := strings.TrimPrefix(waitLine("listening on "), "listening on ")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: url, Options: &imv2.Options{RetryMax: time.Second}})
	require.NoError(t, err)
	defer agent.Close()
	ch := agent.ChannelID()

	text := strings.Repeat("stuck platform ", 300<<10/15)
	require.NoError(t, agent.Reply(ctx, ch, text))
	var out bytes.Buffer
	readUntilFinal(t, outR, &out)
	// The post is blocked now, and stays so: nobody reads the pipe again
	// while this process lives.
	signalled := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "exit 0")
	case <-time.After(grace + time.Second):
		t.Fatalf("still running %s after SIGTERM (grace %s)", time.Since(signalled).Round(time.Millisecond), grace)
	}
	require.Contains(t, waitLine("console: stopped: "), "0 finals finished, 1 cut off")
	_, err = io.Copy(&out, outR) // what the first run wrote, the cut final's beginning included
	require.NoError(t, err)
	require.Equal(t, 1, bytes.Count(out.Bytes(), []byte(`"event":"final"`)), "the first run began the final once")

	// Restarted: xAgent resends the final; it is settled without being shown.
	p2 := start(t, "-addr", addr, "-store", store)
	werr := agent.WaitAcked(ctx, 1)
	if werr != nil {
		require.ErrorIs(t, werr, &imv2.Error{Code: imv2.CodeDeliveryOutcomeUnknown}, "S8: the cut-off final is reported unknown, not shown again")
	}
	require.NoError(t, agent.Reply(ctx, ch, "after the restart"))
	after := p2.until(t, func(e consolebridge.Event) bool {
		return e.Event == "final" && e.Text != nil && *e.Text == "after the restart"
	})
	for _, e := range after {
		if e.Event == "final" {
			require.Equal(t, "after the restart", *e.Text, "S8: the cut-off final is never shown twice")
		}
	}
}

// startPiped starts the console binary with args (and env added to the
// environment) writing its stdout, the "IM platform", to a pipe the test
// reads when it wants: a write blocks while nobody reads. waitLine waits
// up to 30 s for a stderr line starting with prefix and returns it. The
// process is killed when the test ends.
func startPiped(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, outR *os.File, waitLine func(prefix string) string) {
	t.Helper()
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = outR.Close() })
	cmd = exec.Command(binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = outW
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	outW.Close() // the child holds its copy
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, outR, func(prefix string) string {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				require.True(t, ok, "console stderr ended before %q", prefix)
				if strings.HasPrefix(line, prefix) {
					return line
				}
			case <-timeout:
				t.Fatalf("no stderr line %q within 30 s", prefix)
			}
		}
	}
}

// readUntilFinal reads the console's stdout into out until it holds a
// final's event line.
func readUntilFinal(t *testing.T, outR *os.File, out *bytes.Buffer) {
	t.Helper()
	buf := make([]byte, 4096)
	for !bytes.Contains(out.Bytes(), []byte(`"event":"final"`)) {
		n, err := outR.Read(buf)
		require.NoError(t, err, "console stdout ended before the final")
		out.Write(buf[:n])
	}
}
