package cmdrun

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdflags"
)

// strongKey passes the key checks (22 characters or more, not guessable).
const strongKey = "Zq8vN2xR7kLpW4tY9mHc3Jb6Tf5Gd1Sa"

// started runs Command.start as Main does, on args, with the environment
// cleared of the key and token variables but for env (name, value pairs),
// and reports whether run was called and what was written.
type started struct {
	cmd            *Command
	ran            bool
	stdout, stderr string
	err            error
}

func start(t *testing.T, need KeyNeed, env []string, args ...string) started {
	t.Helper()
	for _, name := range []string{cmdflags.KeyEnv, cmdflags.KeyEnv + "_FILE", cmdflags.MetricsEnv} {
		t.Setenv(name, "")
	}
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := started{cmd: Define(fs, "cmd", "cmd 1.2.3 module (devel)", need)}
	var stdout, stderr bytes.Buffer
	s.err = s.cmd.start(args, &stdout, &stderr, func() error { s.ran = true; return nil })
	s.stdout, s.stderr = stdout.String(), stderr.String()
	return s
}

// -version prints the version on stdout and runs nothing: no key is read
// (a weak one in the environment is no error) and no log line written.
func TestCommand_VersionPrintsAndRunsNothing(t *testing.T) {
	s := start(t, KeyRequired, []string{cmdflags.KeyEnv, "k"}, "-version")
	if s.err != nil || s.ran || s.stdout != "cmd 1.2.3 module (devel)\n" || s.stderr != "" {
		t.Fatalf("-version: err %v, ran %v, stdout %q, stderr %q", s.err, s.ran, s.stdout, s.stderr)
	}
}

// A command that needs a key refuses to run without one; one that does
// not runs with none.
func TestCommand_KeyRequiredRefusesNone(t *testing.T) {
	s := start(t, KeyRequired, nil)
	if s.err == nil || !strings.Contains(s.err.Error(), "no API key: set XAGENT_API_KEY") || s.ran {
		t.Errorf("KeyRequired without a key: err %v, ran %v", s.err, s.ran)
	}
	s = start(t, KeyOptional, nil)
	if s.err != nil || !s.ran || s.cmd.APIKey != "" {
		t.Errorf("KeyOptional without a key: err %v, ran %v, key %q", s.err, s.ran, s.cmd.APIKey)
	}
}

// run sees the key, the metrics token and the logger the flags ask for.
func TestCommand_RunGetsKeyTokenAndLogger(t *testing.T) {
	const token = "scraper-token-0123456789abcdef"
	s := start(t, KeyRequired, []string{cmdflags.KeyEnv, strongKey, cmdflags.MetricsEnv, token}, "-log-level", "info")
	if s.err != nil || !s.ran {
		t.Fatalf("err %v, ran %v", s.err, s.ran)
	}
	c := s.cmd
	if c.APIKey != strongKey || c.MetricsToken != token {
		t.Errorf("key %q, token %q", c.APIKey, c.MetricsToken)
	}
	if c.Logger == nil || !c.Logger.Enabled(context.Background(), slog.LevelInfo) || c.Logger.Enabled(context.Background(), slog.LevelDebug) {
		t.Errorf("the logger is not at -log-level info")
	}
}

// A bad log flag, a weak key, or a key or token file that is no regular
// file (read bounded: /dev/zero) ends the start before run.
func TestCommand_BadInputRefusedBeforeRun(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{cmdflags.KeyEnv, strongKey}, []string{"-log-level", "loud"}, "-log-level"},
		{[]string{cmdflags.KeyEnv, strongKey}, []string{"-log-format", "xml"}, "-log-format"},
		{[]string{cmdflags.KeyEnv, "k"}, nil, "under 128 bits"},
		{nil, []string{"-api-key-file", "/dev/zero"}, "no regular file"},
		{[]string{cmdflags.KeyEnv, strongKey}, []string{"-metrics-token-file", "/dev/zero"}, "-metrics-token-file"},
	} {
		s := start(t, KeyOptional, tc.env, tc.args...)
		if s.err == nil || !strings.Contains(s.err.Error(), tc.want) || s.ran {
			t.Errorf("%v %v: err %v, ran %v; want an error naming %q", tc.env, tc.args, s.err, s.ran, tc.want)
		}
	}
}

// With -log-format json the start line is one JSON object at any level:
// the version, the command's settings, then whether a key and a token
// are set (never the key), the metrics address and the log level; and
// Say, which Main gives an error to, writes JSON objects too.
func TestCommand_StartedLineAndSayInJSON(t *testing.T) {
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	c := Define(fs, "cmd", "cmd 1.2.3", KeyRequired)
	t.Setenv(cmdflags.KeyEnv, strongKey)
	t.Setenv(cmdflags.MetricsEnv, "")
	var stderr bytes.Buffer
	err := c.start([]string{"-log-format", "json", "-log-level", "error", "-metrics-addr", "127.0.0.1:0"}, io.Discard, &stderr, func() error {
		c.Started("listen", "127.0.0.1:8080")
		c.Say(slog.LevelError, "cmd: it failed")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 2 || strings.Contains(stderr.String(), strongKey) {
		t.Fatalf("want 2 lines without the key, got:\n%s", stderr.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatalf("%q: %v", lines[0], err)
	}
	for k, want := range map[string]any{
		"msg": "cmd: starting", "version": "cmd 1.2.3", "listen": "127.0.0.1:8080", "api_key": "set",
		"metrics_addr": "127.0.0.1:0", "metrics_token": "none", "log_level": "error",
	} {
		if line[k] != want {
			t.Errorf("the start line's %s = %v, want %v (%s)", k, line[k], want, lines[0])
		}
	}
	if err := json.Unmarshal([]byte(lines[1]), &line); err != nil || line["msg"] != "cmd: it failed" || line["level"] != "ERROR" {
		t.Errorf("Say: %q (%v)", lines[1], err)
	}
}

// Each need has its -api-key usage text: a bridge's says the key is
// required, the console's what it guards when set.
func TestDefine_KeyUsageSaysTheNeed(t *testing.T) {
	for need, want := range map[KeyNeed]string{KeyRequired: "; required, from this flag", KeyOptional: "when set, /ws"} {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		Define(fs, "cmd", "", need)
		if u := fs.Lookup("api-key").Usage; !strings.Contains(u, want) {
			t.Errorf("need %d: -api-key usage %q lacks %q", need, u, want)
		}
	}
}
