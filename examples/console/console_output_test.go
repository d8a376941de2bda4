package main

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/sim"
)

// countingWriter counts the bytes the console printed, and keeps the
// first maxKept of them.
type countingWriter struct {
	n    atomic.Int64
	mu   sync.Mutex
	kept []byte
}

const maxKept = 64 << 10

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	c.mu.Lock()
	c.kept = append(c.kept, p[:min(len(p), maxKept-len(c.kept))]...)
	c.mu.Unlock()
	return len(p), nil
}

// streamOutput runs the console in stream mode (args add -json or not),
// streams text in deltas of piece bytes from a simulated xAgent (with a
// chat.activity thinking snapshot every activityEvery deltas when > 0,
// which prints a typing line between two drafts), sends the final, and returns the bytes the console wrote to stdout once the final
// was acknowledged (so printed).
func streamOutput(t *testing.T, text string, piece, activityEvery int, args ...string) (int64, []byte) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"-addr", "127.0.0.1:0", "-mode", "stream"}, args...)...)
	var out countingWriter
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // kept open: EOF would not stop it, but a nil stdin is /dev/null
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	errs := bufio.NewReader(stderr)
	var url string
	for ok := false; !ok; { // warnings are logged before the "listening on" line
		line, err := errs.ReadString('\n')
		require.NoError(t, err)
		url, ok = strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	}
	go func() { _, _ = io.Copy(io.Discard, errs) }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	delivered := make(chan struct{})
	agent, err := sim.Start(ctx, sim.Config{Connector: url, Options: &imv2.Options{
		OnDelivered: func(string, imv2.ChatMessage, imv2.AckStatus) { close(delivered) },
	}})
	require.NoError(t, err)
	r, err := agent.Client().NewReply(agent.ChannelID(), "")
	require.NoError(t, err)
	for i, n := 0, 1; i < len(text); i, n = i+piece, n+1 {
		if activityEvery > 0 && n%activityEvery == 0 {
			require.NoError(t, r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking}))
		}
		// Deltas over the stream's cap are refused (D9); the final shows all.
		_ = r.Delta(ctx, text[i:min(i+piece, len(text))])
	}
	_, err = r.Final(ctx, imv2.ChatMessage{Text: text})
	require.NoError(t, err)
	select {
	case <-delivered:
	case <-ctx.Done():
		_ = agent.Close()
		t.Fatal("the final was not acknowledged")
	}
	// Printed before the ack, but maybe still in the pipe: Wait copies it all.
	require.NoError(t, agent.Close())
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	out.mu.Lock()
	defer out.mu.Unlock()
	return out.n.Load(), append([]byte(nil), out.kept...)
}

// TestConsole_D8_StreamOutputCoalesced: 1 MiB of 10-byte deltas in stream
// mode prints no more than three times the text (the attack run saw 42 MB):
// pretty mode writes each new suffix once, also when typing lines come
// between two drafts (it used to print the whole draft again after each),
// and -json draft events, which carry the whole text so far, are coalesced
// so that they add up to at most twice the text (plus 4 KiB).
func TestConsole_D8_StreamOutputCoalesced(t *testing.T) {
	t.Parallel() // a child process does the work: overlap its waits with the other tests
	// 1 MiB less 4 KiB, so that the final fits in one frame (W2).
	text := strings.Repeat("0123456789abcdef", (1<<20-4<<10)/16)
	for _, c := range []struct {
		name          string
		args          []string
		activityEvery int
		bound         int64 // 3× the text
	}{
		{"pretty", nil, 0, 3 * int64(len(text))},
		{"pretty-with-activity", nil, 1024, 3 * int64(len(text))},
		{"json", []string{"-json"}, 0, 3 * int64(len(text))},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n, _ := streamOutput(t, text, 10, c.activityEvery, c.args...)
			t.Logf("%s: %d bytes of output for %d bytes of text in 10-byte deltas (%.1f×)", c.name, n, len(text), float64(n)/float64(len(text)))
			require.GreaterOrEqual(t, n, int64(len(text)), "the final is shown")
			require.LessOrEqual(t, n, c.bound)
		})
	}
}

// TestConsole_PrettyModeStripsControlSequences: text xAgent streams with
// terminal escape sequences (a window title, a screen clear, a hyperlink,
// a clipboard write, 8-bit CSI, a carriage return) reaches the terminal
// without them in every mode, the sequences cut across deltas included.
func TestConsole_PrettyModeStripsControlSequences(t *testing.T) {
	text := "safe \x1b]0;pwned\x07text \x1b[2J\x1b[Hmore \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ " +
		"\x1b]52;c;ZWNobyBwd25lZA==\x07\u009b31mend\rover\x00 done"
	for _, mode := range []string{"stream", "edit", "buffer"} {
		t.Run(mode, func(t *testing.T) {
			_, out := streamOutput(t, text, 3, 0, "-mode", mode)
			require.Contains(t, string(out), "safe text more link endover done", "the text is shown")
			for i, r := range string(out) {
				if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
					t.Fatalf("control %U at byte %d of the output: %q", r, i, out)
				}
			}
		})
	}
}
