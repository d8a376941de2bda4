package cmdflags

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
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

// $XAGENT_API_KEY_FILE names the key's file when no flag gives the key;
// /dev/zero as the key file is refused (a bounded read), not read until
// the memory runs out.
func TestKeyFlags_FileEnvAndBoundedRead(t *testing.T) {
	const long = strongKey
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(long+"-envfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(KeyEnv, long+"-env")
	t.Setenv(KeyEnv+"_FILE", file)
	if got, err := readKey(t); err != nil || got != long+"-envfile" {
		t.Errorf("$%s_FILE: %q, %v", KeyEnv, got, err)
	}
	if got, err := readKey(t, "-api-key", long+"-flag"); err != nil || got != long+"-flag" {
		t.Errorf("-api-key over $%s_FILE: %q, %v", KeyEnv, got, err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := readKey(t, "-api-key-file", "/dev/zero"); err == nil || !strings.Contains(err.Error(), "no regular file") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
}

// The metrics token comes from -metrics-token-file, else the
// environment; a short token, an empty or multi-line file and one over
// MaxSecretFileBytes are refused (not read whole).
func TestMetricsFlags_Token(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := func(args ...string) (string, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		m := MetricsFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return m.Token()
	}
	const good = "scraper-token-0123456789abcdef"
	t.Setenv(MetricsEnv, "")
	if got, err := token(); got != "" || err != nil {
		t.Errorf("none: %q %v", got, err)
	}
	if got, err := token("-metrics-token-file", write("ok", good+"\n")); got != good || err != nil {
		t.Errorf("file: %q %v", got, err)
	}
	t.Setenv(MetricsEnv, good)
	if got, err := token(); got != good || err != nil {
		t.Errorf("env: %q %v", got, err)
	}
	for name, body := range map[string]string{
		"short": "abc", "empty": "\n", "two-lines": good + "\n" + good + "\n", "huge": strings.Repeat("a", MaxSecretFileBytes+10),
	} {
		if got, err := token("-metrics-token-file", write(name, body)); err == nil {
			t.Errorf("%s: accepted %q", name, got)
		}
	}
}

// Say writes a command's own line as plain text in text mode and as one
// JSON object (msg the text, with its attrs) with -log-format json, at
// any -log-level.
func TestLogFlags_Say(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		l := LogFlags(fs)
		if err := fs.Parse([]string{"-log-format", format, "-log-level", "error"}); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		l.Say(&buf)(slog.LevelInfo, "cmd: listening on 127.0.0.1:1", "url", "http://127.0.0.1:1")
		out := strings.TrimSuffix(buf.String(), "\n")
		if format == "text" {
			if out != "cmd: listening on 127.0.0.1:1" {
				t.Errorf("text: %q", out)
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || m["msg"] != "cmd: listening on 127.0.0.1:1" || m["url"] != "http://127.0.0.1:1" || m["level"] != "INFO" {
			t.Errorf("json: %q: %v %v", out, m, err)
		}
	}
}
