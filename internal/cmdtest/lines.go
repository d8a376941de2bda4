package cmdtest

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Line is one line a command wrote to stderr, with its JSON object when
// it is one (nil when not).
type Line struct {
	Raw string
	Obj map[string]any
}

// JSONLines reads a command's stderr as -log-format json promises it:
// one JSON object per line.
type JSONLines struct {
	got <-chan Line
	// All holds every line read so far, in order.
	All []Line
}

// StartJSONLines starts cmd and reads its stderr line by line; the
// test's cleanup kills the process if it still runs.
func StartJSONLines(t *testing.T, cmd *exec.Cmd) *JSONLines {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got := make(chan Line, 4096)
	go func() { // ends with stderr, at the latest when the process is killed
		defer close(got)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = nil
			}
			got <- Line{sc.Text(), m}
		}
	}()
	return &JSONLines{got: got}
}

// Next reads lines until one whose msg starts with msgPrefix and returns
// it; it fails t at a line that is not a JSON object, at the end of
// stderr, or after hangLimit.
func (j *JSONLines) Next(t *testing.T, msgPrefix string) Line {
	t.Helper()
	timeout := time.After(hangLimit)
	for {
		select {
		case l, ok := <-j.got:
			if !ok {
				t.Fatalf("stderr ended before a line %q", msgPrefix)
			}
			j.All = append(j.All, l)
			if l.Obj == nil {
				t.Fatalf("not a JSON object: %q", l.Raw)
			}
			if msg, _ := l.Obj["msg"].(string); strings.HasPrefix(msg, msgPrefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line %q within %v", msgPrefix, hangLimit)
		}
	}
}

// Rest reads the lines up to the end of stderr (call it once the
// process was told to exit; it fails t after hangLimit) and fails t at one that is not a JSON
// object or holds one of secrets. It returns All.
func (j *JSONLines) Rest(t *testing.T, secrets ...string) []Line {
	t.Helper()
	timeout := time.After(hangLimit)
	for done := false; !done; {
		select {
		case l, ok := <-j.got:
			if done = !ok; ok {
				j.All = append(j.All, l)
			}
		case <-timeout:
			t.Fatalf("stderr did not end within %v", hangLimit)
		}
	}
	for _, l := range j.All {
		if l.Obj == nil {
			t.Errorf("not a JSON object: %q", l.Raw)
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(l.Raw, s) {
				t.Errorf("a line holds a secret: %q", l.Raw)
			}
		}
	}
	return j.All
}
