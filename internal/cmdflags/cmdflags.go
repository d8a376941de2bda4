// Package cmdflags holds the command-line flags every Connector command
// shares, so the console and the Matrix bridge read their API key and set
// up their logs the same way. The Matrix bridge is its own module; it can
// import this package because Go's internal rule goes by import path, and
// its path is under this module's.
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

// MaxKeyFileBytes bounds what -api-key-file reads: a key file holds one
// line, and a file that goes on (a device such as /dev/zero, a log) is
// refused after this many bytes rather than read into memory.
const MaxKeyFileBytes = 4 << 10

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
		file:   fs.String("api-key-file", "", "read the API key from FILE, one line (a container secret; mode 600); SIGHUP reads it again and the old key stays valid for a grace; without it or -api-key, $"+KeyEnv),
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
// $XAGENT_API_KEY; none gives "" and no error (the caller decides whether
// a key is required). A key under MinKeyLen, or one apikey.CheckStrength
// finds guessable (a repeated character, a run, common words), is refused
// unless -allow-weak-key says the run is a test. The key file is read as
// a secret: one line of at most MaxKeyFileBytes, and a warning is logged
// when its mode lets the group or others read it.
func (k *Key) Read() (string, error) {
	key := *k.flag
	switch env := os.Getenv(KeyEnv); {
	case *k.file != "" && *k.flag != "":
		return "", errors.New("-api-key and -api-key-file: give one")
	case *k.file != "":
		var err error
		if key, err = k.readFile(); err != nil {
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

// readFile reads -api-key-file: at most MaxKeyFileBytes, one line (a
// final line break is dropped, as are spaces around the key), no space
// or control character inside.
func (k *Key) readFile() (string, error) {
	name := *k.file
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("-api-key-file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o077 != 0 && runtime.GOOS != "windows" {
		k.log().Warn("the API key file is readable by its group or others; chmod 600 it", "file", name, "mode", fmt.Sprintf("%04o", st.Mode().Perm()))
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxKeyFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("-api-key-file: %w", err)
	}
	if len(b) > MaxKeyFileBytes {
		return "", fmt.Errorf("-api-key-file %s is longer than %d bytes: a key file holds one line, the key", name, MaxKeyFileBytes)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case key == "":
		return "", fmt.Errorf("-api-key-file %s is empty", name)
	case strings.ContainsAny(key, "\r\n"):
		return "", fmt.Errorf("-api-key-file %s holds %d lines: a key file holds one line, the key", name, len(strings.FieldsFunc(key, func(r rune) bool { return r == '\n' || r == '\r' })))
	case strings.IndexFunc(key, func(r rune) bool {
		return r <= ' ' || r == 0x7f || !utf8.ValidRune(r) || unicode.IsSpace(r) || unicode.IsControl(r)
	}) >= 0 || !utf8.ValidString(key):
		return "", fmt.Errorf("-api-key-file %s: the key has a space or a control character; a key is one token", name)
	}
	return key, nil
}

// Watch subscribes to SIGHUP before it returns and, until ctx ends, reads
// -api-key-file again on each one and hands a key that passes Read's
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
		if *k.file == "" {
			k.log().Warn("SIGHUP: the API key did not come from -api-key-file; nothing to reload")
			continue
		}
		key, err := k.readFile()
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
		k.log().Warn("SIGHUP: the API key was reloaded from its file; the previous key stays valid for a grace", "file", *k.file)
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
