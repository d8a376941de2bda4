package cmdflags

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func logLines(t *testing.T, args ...string) string {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	l := LogFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log, err := l.Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("d-line")
	log.Info("i-line")
	log.Warn("w-line", "connector_channel_id", "cch_1")
	log.Error("e-line")
	return buf.String()
}

// By default warnings and errors are shown, nothing below; -log-level and
// -v move the floor.
func TestLogFlags_Levels(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		want, omit []string
	}{
		{nil, []string{"w-line", "e-line"}, []string{"d-line", "i-line"}},
		{[]string{"-log-level", "info"}, []string{"i-line", "w-line"}, []string{"d-line"}},
		{[]string{"-log-level", "error"}, []string{"e-line"}, []string{"w-line"}},
		{[]string{"-v"}, []string{"d-line", "i-line", "w-line", "e-line"}, nil},
	} {
		out := logLines(t, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out)
			}
		}
		for _, o := range tc.omit {
			if strings.Contains(out, o) {
				t.Errorf("%v: %q logged:\n%s", tc.args, o, out)
			}
		}
	}
}

// -log-format json writes one JSON object per line.
func TestLogFlags_JSON(t *testing.T) {
	out := logLines(t, "-log-format", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines (warn, error), got:\n%s", out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("%q: %v", lines[0], err)
	}
	if m["level"] != "WARN" || m["msg"] != "w-line" || m["connector_channel_id"] != "cch_1" {
		t.Errorf("got %v", m)
	}
}

func TestLogFlags_RefusesUnknown(t *testing.T) {
	for _, args := range [][]string{{"-log-level", "loud"}, {"-log-format", "xml"}} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		l := LogFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Logger(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), args[1]) {
			t.Errorf("%v: err %v, want one naming %q", args, err, args[1])
		}
	}
}

func readKey(t *testing.T, args ...string) (string, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	k := KeyFlags(fs, "the key")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return k.Read()
}

// The key comes from the flag, the file or $XAGENT_API_KEY, in that
// order; a short one is refused unless -allow-weak-key.
func TestKeyFlags_Sources(t *testing.T) {
	const long = "Zq8vN2xR7kLpW4tY9mHc3Jb6"
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(" "+long+"-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(KeyEnv, long+"-env")
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{nil, long + "-env", ""},
		{[]string{"-api-key", long + "-flag"}, long + "-flag", ""},
		{[]string{"-api-key-file", file}, long + "-file", ""},
		{[]string{"-api-key-file", file, "-api-key", long}, "", "give one"},
		{[]string{"-api-key", "short"}, "", "under 128 bits"},
		{[]string{"-api-key", "short", "-allow-weak-key"}, "short", ""},
	} {
		got, err := readKey(t, tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}
