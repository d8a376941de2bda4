// Package cmdflags holds the command-line flags every Connector command
// shares (the API key's, the logs', monitoring's) and the bounded read of
// a secret file, so the commands read their key and set up their logs the
// same way; cmdrun.Command puts them together for a command's main.
package cmdflags

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/xagentkit/imv2/internal/apikey"
)

// KeyEnv is the environment variable the API key may come from.
const KeyEnv = "XAGENT_API_KEY"

// MinKeyLen is 128 bits as base64 (22 characters), the floor for the
// secret that guards the data plane.
const MinKeyLen = 22

// Key is the API key's flags: -api-key, -api-key-file and -allow-weak-key.
type Key struct {
	flag, file *string
	weakOK     *bool
	// Log receives the warnings of Read (a key file others can read) and
	// the reloads of Watch; nil is slog.Default().
	Log *slog.Logger
}

// KeyFlags defines the API key's flags on fs; what says what the key
// guards, for the usage text.
func KeyFlags(fs *flag.FlagSet, what string) *Key {
	return &Key{
		flag:   fs.String("api-key", "", what+` (visible in ps: prefer $`+KeyEnv+` or -api-key-file)`),
		file:   fs.String("api-key-file", "", "read the API key from FILE, one line (a container secret; mode 600); SIGHUP reads it again and the old key stays valid for a grace; without it or -api-key, the file $"+KeyEnv+"_FILE names, else $"+KeyEnv),
		weakOK: fs.Bool("allow-weak-key", false, "for testing only: accept an API key under 128 bits (22 characters) or a guessable one"),
	}
}

func (k *Key) log() *slog.Logger {
	if k.Log != nil {
		return k.Log
	}
	return slog.Default()
}

// Read picks the API key: -api-key-file or -api-key (not both), else
// the file $XAGENT_API_KEY_FILE names, else $XAGENT_API_KEY; none gives "" and no error (the caller decides whether
// a key is required). A key under MinKeyLen, or one apikey.CheckStrength
// finds guessable (a repeated character, a run, common words), is refused
// unless -allow-weak-key says the run is a test. The key file is read as
// a secret (ReadSecretFile: one line of at most MaxSecretFileBytes), and a warning is logged
// when its mode lets the group or others read it.
func (k *Key) Read() (string, error) {
	key, file := *k.flag, k.keyFile()
	switch env := os.Getenv(KeyEnv); {
	case *k.file != "" && *k.flag != "":
		return "", errors.New("-api-key and -api-key-file: give one")
	case file != "":
		var err error
		if key, err = k.readFile(file); err != nil {
			return "", err
		}
	case env != "" && *k.flag == "":
		key = env
	}
	if err := k.check(key); err != nil {
		return "", err
	}
	return key, nil
}

// check refuses a weak key unless -allow-weak-key.
func (k *Key) check(key string) error {
	if key == "" || *k.weakOK {
		return nil
	}
	if len(key) < MinKeyLen {
		return fmt.Errorf("the API key has %d characters, under 128 bits (%d base64 characters); use a longer one, or -allow-weak-key in tests", len(key), MinKeyLen)
	}
	if err := apikey.CheckStrength(key); err != nil {
		return fmt.Errorf("%w; or -allow-weak-key in tests", err)
	}
	return nil
}

// keyFile is the key's file: -api-key-file, else (no -api-key either)
// the file $XAGENT_API_KEY_FILE names, the container form of the variable.
func (k *Key) keyFile() string {
	if *k.file != "" || *k.flag != "" {
		return *k.file
	}
	return os.Getenv(KeyEnv + "_FILE")
}

// readFile reads the key file as a secret (ReadSecretFile), spaces
// around the key dropped and none inside: a key is one token.
func (k *Key) readFile(name string) (string, error) {
	key, warning, err := ReadSecretFile(name)
	if err != nil {
		return "", fmt.Errorf("the API key file: %w", err)
	}
	if st, err := os.Stat(name); err == nil && warning != "" && runtime.GOOS != "windows" {
		k.log().Warn("the API key file is readable by its group or others; chmod 600 it", "file", name, "mode", fmt.Sprintf("%04o", st.Mode().Perm()))
	}
	key = strings.TrimSpace(key)
	if strings.IndexFunc(key, func(r rune) bool {
		return r <= ' ' || r == 0x7f || r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r)
	}) >= 0 {
		return "", fmt.Errorf("the API key file %s: the key has a space or a control character; a key is one token", name)
	}
	return key, nil
}

// Watch subscribes to SIGHUP before it returns and, until ctx ends, reads
// the key file again on each one and hands a key that passes Read's
// checks to set (connector.Connector.SetAPIKey, which keeps the old key
// valid for a grace); a file that fails them, or a set that fails, is
// logged and the running key stays. Without -api-key-file a SIGHUP only
// logs that it has nothing to reload. Its goroutine ends with ctx.
func (k *Key) Watch(ctx context.Context, set func(key string) error) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go k.watch(ctx, hup, set)
}

func (k *Key) watch(ctx context.Context, hup chan os.Signal, set func(key string) error) {
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		file := k.keyFile()
		if file == "" {
			k.log().Warn("SIGHUP: the API key did not come from a file; nothing to reload")
			continue
		}
		key, err := k.readFile(file)
		if err == nil {
			err = k.check(key)
		}
		if err == nil {
			err = set(key)
		}
		if err != nil {
			k.log().Error("SIGHUP: the API key was not reloaded; the running key stays", "err", err)
			continue
		}
		k.log().Warn("SIGHUP: the API key was reloaded from its file; the previous key stays valid for a grace", "file", file)
	}
}

// Log is the log flags: -log-level, -log-format and -v (-log-level debug).
type Log struct {
	level, format *string
	debug         *bool
}

// LogFlags defines the log flags on fs. The default level is warn: an
// operator sees warnings and errors without asking.
func LogFlags(fs *flag.FlagSet) *Log {
	return &Log{
		level:  fs.String("log-level", "warn", "log lines at or above LEVEL on stderr: debug | info | warn | error"),
		format: fs.String("log-format", "text", "log line format: text (key=value) | json (one object per line)"),
		debug:  fs.Bool("v", false, "the same as -log-level debug"),
	}
}

// JSON reports whether -log-format json was asked for: a command then
// writes every stderr line of its own as a JSON object too.
func (l *Log) JSON() bool { return *l.format == "json" }

// Level is -log-level as given ("debug" with -v).
func (l *Log) Level() string {
	if *l.debug {
		return "debug"
	}
	return *l.level
}

// Lines returns a logger in the chosen format that writes every level:
// for the lines a command always writes (its start line with the
// version and settings, its stop line), whatever -log-level filters.
func (l *Log) Lines(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	if l.JSON() {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Say returns what writes a command's own lines to w (listening on,
// monitoring on, stopped), whatever -log-level filters: the text as is in
// text mode, which readers match; with -log-format json a JSON object
// whose msg is the text, with attrs, like every other line.
func (l *Log) Say(w io.Writer) func(level slog.Level, text string, attrs ...any) {
	if !l.JSON() {
		return func(_ slog.Level, text string, _ ...any) { fmt.Fprintln(w, text) }
	}
	lines := l.Lines(w)
	return func(level slog.Level, text string, attrs ...any) {
		lines.Log(context.Background(), level, text, attrs...)
	}
}

// Logger returns the logger the flags ask for, writing to w, or an error
// naming a level or format it does not know.
func (l *Log) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(*l.level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", *l.level)
	}
	if *l.debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	switch *l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", *l.format)
}

// MetricsEnv is the environment variable the metrics token may come from.
const MetricsEnv = "XAGENT_METRICS_TOKEN"

// Metrics is the monitoring flags: -metrics-addr and -metrics-token-file.
// A scraper never needs xAgent's API key.
type Metrics struct {
	addr, file *string
}

// MetricsFlags defines the monitoring flags on fs.
func MetricsFlags(fs *flag.FlagSet) *Metrics {
	return &Metrics{
		addr: fs.String("metrics-addr", "", "also serve /metrics, /livez and /readyz on host:port (port 0 picks a free one), for a scraper on a network xAgent does not reach; open there unless a metrics token is set"),
		file: fs.String("metrics-token-file", "", `read the token a scraper sends as "Authorization: Bearer TOKEN" on /metrics from FILE; or set $`+MetricsEnv+`. Without one, /metrics is served only on -metrics-addr; the API key never opens it`),
	}
}

// Addr is -metrics-addr: "" when not set.
func (m *Metrics) Addr() string { return *m.addr }

// Token reads the metrics token: -metrics-token-file, else
// $XAGENT_METRICS_TOKEN, else "". A token under MinKeyLen is refused, as a
// weak API key is.
func (m *Metrics) Token() (string, error) {
	token := os.Getenv(MetricsEnv)
	if *m.file != "" {
		var err error
		if token, _, err = ReadSecretFile(*m.file); err != nil {
			return "", fmt.Errorf("-metrics-token-file: %w", err)
		}
	}
	if token != "" && len(token) < MinKeyLen {
		return "", fmt.Errorf("the metrics token has %d characters, under 128 bits (%d base64 characters)", len(token), MinKeyLen)
	}
	return token, nil
}

// Given says whether a secret was given, for a start line: "set" or
// "none", never the secret.
func Given(secret string) string {
	if secret == "" {
		return "none"
	}
	return "set"
}
