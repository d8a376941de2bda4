package imv2test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Process is a Connector running as a child process under the command
// line contract of the console example (examples/console/README.md): it
// announces its URL on stderr (see StartProcess), writes one JSON Event
// per line on stdout (its -json flag), and reads user input on stdin, one
// message per line, "/file PATH" for a file. Process gives the suite all
// three: the URL, an Observer and a User.
type Process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	obs   *StreamObserver
	url   string
	dir   string

	wmu sync.Mutex // stdin writes

	errMu   sync.Mutex
	errTail []string
	errDone chan struct{}
	closeMu sync.Mutex
	closed  bool
}

// maxStderrLines bounds the stderr lines a Process keeps for diagnostics.
const maxStderrLines = 50

// StartProcess starts name with args and waits (up to ctx) for the
// stderr line that announces its URL, in either form the commands of this
// module print it:
//
//	listening on http://127.0.0.1:8787
//	{"time":"…","level":"INFO","msg":"listening on http://127.0.0.1:8787","url":"http://127.0.0.1:8787"}
//
// the second a log/slog JSON record, as with -log-format json: its msg
// is "listening on" and the URL (or "listening on" alone), its url
// attribute the URL. Other stderr lines before it are kept for Stderr.
// The child runs in its own process group, so Close also stops what it
// started (go run's compiled binary).
func StartProcess(ctx context.Context, name string, args ...string) (*Process, error) {
	dir, err := os.MkdirTemp("", "imv2test-process")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	setProcessGroup(cmd)
	p := &Process{cmd: cmd, dir: dir, errDone: make(chan struct{})}
	stdin, err1 := cmd.StdinPipe()
	stdout, err2 := cmd.StdoutPipe()
	stderr, err3 := cmd.StderrPipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.obs = NewStreamObserver(stdout)
	found := make(chan string, 1)
	go p.readStderr(stderr, found)
	select {
	case u, ok := <-found:
		if !ok {
			err := fmt.Errorf("imv2test: %s exited before printing \"listening on URL\": %s", name, p.Stderr())
			p.Close()
			return nil, err
		}
		p.url = u
		return p, nil
	case <-ctx.Done():
		p.Close()
		return nil, fmt.Errorf("imv2test: %s printed no \"listening on URL\": %w", name, ctx.Err())
	}
}

func (p *Process) readStderr(r io.Reader, found chan<- string) {
	defer close(p.errDone)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		if !sent {
			if u, ok := listeningURL(line); ok {
				found <- u
				sent = true
				continue
			}
		}
		p.errMu.Lock()
		p.errTail = append(p.errTail, line)
		if len(p.errTail) > maxStderrLines {
			p.errTail = p.errTail[1:]
		}
		p.errMu.Unlock()
	}
	if !sent {
		close(found)
	}
}

// listeningURL reads the URL from a line announcing it (StartProcess):
// plain text, or a slog JSON record whose url attribute it is.
func listeningURL(line string) (string, bool) {
	line = strings.TrimSpace(line)
	if u, ok := strings.CutPrefix(line, "listening on "); ok {
		return u, true
	}
	if !strings.HasPrefix(line, "{") {
		return "", false
	}
	var rec struct {
		Msg string `json:"msg"`
		URL string `json:"url"`
	}
	// The msg decides, not the url alone: "monitoring on" carries one too.
	if json.Unmarshal([]byte(line), &rec) != nil || rec.URL == "" ||
		(rec.Msg != "listening on" && rec.Msg != "listening on "+rec.URL) {
		return "", false
	}
	return rec.URL, true
}

// URL returns the base URL the process printed.
func (p *Process) URL() string { return p.url }

// Observer returns the observer reading the process's stdout.
func (p *Process) Observer() Observer { return p.obs }

// Stderr returns the last lines the process wrote to stderr.
func (p *Process) Stderr() string {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return strings.Join(p.errTail, "\n")
}

// Say writes text as one stdin line: a user message (User).
func (p *Process) Say(_ context.Context, _ string, text string) error {
	if strings.ContainsAny(text, "\r\n") {
		return errors.New("imv2test: a user line cannot hold a newline")
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := io.WriteString(p.stdin, text+"\n")
	return err
}

// SendFile stores data under filename in a temporary folder and writes
// "/file PATH" on stdin (User).
func (p *Process) SendFile(ctx context.Context, channelID, filename string, data []byte) error {
	path := filepath.Join(p.dir, filepath.Base(filename))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return p.Say(ctx, channelID, "/file "+path)
}

// Connector returns the Connector to check: the process's URL, observer
// and user. Set APIKey, Buffered and the rest on the result.
func (p *Process) Connector() Connector {
	return Connector{URL: p.url, Observer: p.obs, User: p}
}

// Close stops the process group, waits for it and its output readers,
// and removes the temporary folder. It is idempotent.
func (p *Process) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	killProcessGroup(p.cmd)
	_ = p.stdin.Close()
	<-p.obs.Done()
	<-p.errDone
	err := p.cmd.Wait()
	os.RemoveAll(p.dir)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil // killed: the expected end
	}
	return err
}
