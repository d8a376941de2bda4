package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/sim"
)

var binary string

func TestMain(m *testing.M) {
	os.Exit(cmdtest.BuildAndRun(m, ".", "console", &binary))
}

// proc is a console Connector running as a subprocess under the contract
// of its command line: stdin lines in, JSON events out.
type proc struct {
	logMu  sync.Mutex
	log    []string // stderr after the first line
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan consolebridge.Event
	url    string
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv is start with env added to the console's environment.
func startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"-addr", "127.0.0.1:0", "-json"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stdin: stdin, events: make(chan consolebridge.Event, 1024)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		p.logMu.Lock()
		defer p.logMu.Unlock()
		if log := strings.Join(p.log, "\n"); strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
			t.Errorf("the console reported on stderr:\n%s", log)
		}
	})
	errs := bufio.NewReader(stderr)
	for p.url == "" { // -v may log before the one "listening on" line
		line, err := errs.ReadString('\n')
		require.NoError(t, err)
		if url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on "); ok {
			p.url = url
		}
	}
	go func() { // keep stderr drained; shown when a wait fails
		sc := bufio.NewScanner(errs)
		for sc.Scan() {
			p.logMu.Lock()
			p.log = append(p.log, sc.Text())
			p.logMu.Unlock()
		}
	}()
	go func() {
		defer close(p.events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e consolebridge.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = consolebridge.Event{Event: "invalid-json: " + sc.Text()}
			}
			p.events <- e
		}
	}()
	return p
}

// until collects events until one satisfies stop.
func (p *proc) until(t *testing.T, stop func(consolebridge.Event) bool) []consolebridge.Event {
	t.Helper()
	var got []consolebridge.Event
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-p.events:
			require.True(t, ok, "console exited; events so far: %+v", got)
			require.False(t, strings.HasPrefix(e.Event, "invalid-json"), e.Event)
			got = append(got, e)
			if stop(e) {
				return got
			}
		case <-deadline:
			p.logMu.Lock()
			defer p.logMu.Unlock()
			t.Fatalf("no matching event; got %+v\nconsole stderr:\n%s", got, strings.Join(p.log, "\n"))
		}
	}
}

func kinds(es []consolebridge.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Event)
	}
	return out
}

// TestConsole_D8_K5_M11_ModesAgainstSimulator drives the console binary in
// each display mode against the simulator over a real WebSocket: the user
// line is sent and acknowledged, activity shows as typing and is cleared,
// the reply streams as the mode says, and exactly one final carries the
// final text.
func TestConsole_D8_K5_M11_ModesAgainstSimulator(t *testing.T) {
	for _, mode := range []string{"stream", "edit", "buffer"} {
		t.Run(mode, func(t *testing.T) {
			p := start(t, "-mode", mode)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			agent, err := sim.Start(ctx, sim.Config{Connector: p.url, Rate: 50}) // slow enough for drafts to show (D8)
			require.NoError(t, err)
			defer agent.Close()

			_, err = io.WriteString(p.stdin, "hello from the terminal\n")
			require.NoError(t, err)
			// The ack ("sent") and the reply race: wait for both.
			var sawFinal, sawSent bool
			events := p.until(t, func(e consolebridge.Event) bool {
				sawFinal = sawFinal || e.Event == "final"
				sawSent = sawSent || e.Event == "sent"
				return sawFinal && sawSent
			})
			agent.Wait()

			require.Contains(t, kinds(events), "sent")
			// Activity snapshots may coalesce (the newest wins, C1), but a
			// shown status is always cleared before the final (C6).
			shown := false
			for _, e := range events {
				switch e.Event {
				case "typing":
					shown = true
				case "typing_clear":
					shown = false
				}
			}
			require.False(t, shown, "C6: typing still shown at the final: %v", kinds(events))
			var final consolebridge.Event
			for _, e := range events {
				if e.Event == "final" {
					final = e
				}
			}
			require.Equal(t, "You said: hello from the terminal", *final.Text, "M11")
			users := agent.UserMessages()
			require.Len(t, users, 1)
			require.Equal(t, "hello from the terminal", users[0].Text)
			for _, e := range events {
				switch mode {
				case "stream":
					require.NotContains(t, []string{"post", "edit"}, e.Event)
				case "edit":
					require.NotEqual(t, "draft", e.Event)
				case "buffer":
					require.NotContains(t, []string{"draft", "post", "edit"}, e.Event, "K5: no temporary text")
				}
			}
			if mode == "stream" {
				require.Contains(t, kinds(events), "draft", "D8")
			}
			if mode == "edit" {
				require.Contains(t, kinds(events), "post", "D8")
			}
			// The final is resent (a lost ack): duplicate, and no second final event.
			ack, err := agent.Resend(ctx, agent.ChannelID(), agent.Finals()[0])
			require.NoError(t, err)
			require.Equal(t, "duplicate", string(ack.Status))
			_, err = io.WriteString(p.stdin, "second line\n")
			require.NoError(t, err)
			more := p.until(t, func(e consolebridge.Event) bool { return e.Event == "final" })
			for _, e := range more[:len(more)-1] {
				require.NotEqual(t, "final", e.Event, "A6: one final per message")
			}
			require.NotEqual(t, final.MessageID, more[len(more)-1].MessageID)
		})
	}
}

// TestConsole_M6_FileLineSendsDownloadableFile: "/file PATH" sends a
// file-only message whose download_url the simulator can fetch.
func TestConsole_M6_FileLineSendsDownloadableFile(t *testing.T) {
	p := start(t, "-ack-timeout", "1s", "-v") // a lost first transmission is resent quickly
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: p.url})
	require.NoError(t, err)
	defer agent.Close()
	path := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(path, []byte("file body"), 0o600))
	_, err = io.WriteString(p.stdin, "/file "+path+"\n")
	require.NoError(t, err)
	// The reply's final may be shown before the ack of the file makes
	// "sent": wait for both, in either order.
	var sent, final bool
	p.until(t, func(e consolebridge.Event) bool {
		sent, final = sent || e.Event == "sent", final || e.Event == "final"
		return sent
	})
	users := agent.UserMessages()
	require.Len(t, users, 1)
	require.Empty(t, users[0].Text, "M3: a file-only message")
	require.Len(t, users[0].Files, 1)
	body, err := agent.Fetch(ctx, users[0].Files[0])
	require.NoError(t, err)
	require.Equal(t, "file body", string(body))
	if !final {
		p.until(t, func(e consolebridge.Event) bool { return e.Event == "final" })
	}
	agent.Wait()
}

// logLine waits for the stderr line after "listening on" that begins with
// prefix and returns the rest of it.
func (p *proc) logLine(t *testing.T, prefix string) string {
	t.Helper()
	return retry(t, func() (string, error) {
		p.logMu.Lock()
		defer p.logMu.Unlock()
		for _, l := range p.log {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest, nil
			}
		}
		return "", io.ErrNoProgress
	})
}
