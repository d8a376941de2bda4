package cmdrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/xagentkit/imv2/internal/cmdflags"
)

// KeyNeed says whether a command starts without an API key; each has its
// own -api-key usage text.
type KeyNeed int

const (
	// KeyOptional: without a key the Connector serves unauthenticated,
	// with the kit's warning (the console, for a developer's loopback).
	KeyOptional KeyNeed = iota
	// KeyRequired: without a key the command refuses to start (a bridge).
	KeyRequired
)

// usage is the -api-key flag's text for the need.
func (n KeyNeed) usage() string {
	if n == KeyRequired {
		return `the key xAgent sends as "Authorization: Bearer KEY" on /ws, /health and /files/uploads (never /metrics: see -metrics-addr); required, from this flag, -api-key-file or $` + cmdflags.KeyEnv
	}
	return `when set, /ws, /health and /files/uploads need "Authorization: Bearer KEY" (never /metrics: see -metrics-addr)`
}

// Command is what every Connector command shares: the API key's, the
// log and the monitoring flags (package cmdflags) and -version, read the
// same way, and the command's own lines. Define it, define the
// platform's flags beside it, then call Main.
type Command struct {
	// Logger is the logger -log-level and -log-format ask for; set by
	// Main before it calls run.
	Logger *slog.Logger
	// Say writes the command's own lines on stderr (cmdflags.Log.Say):
	// plain text until the flags are read, then in the -log-format asked
	// for.
	Say func(level slog.Level, text string, attrs ...any)
	// APIKey is the key cmdflags.Key.Read picked; "" only with
	// KeyOptional. MetricsToken is cmdflags.Metrics.Token's, "" for none.
	APIKey, MetricsToken string

	name, version string
	need          KeyNeed
	fs            *flag.FlagSet
	key           *cmdflags.Key
	log           *cmdflags.Log
	metrics       *cmdflags.Metrics
	showVersion   *bool
	stderr        io.Writer
}

// Define defines the shared flags on fs (flag.CommandLine in a main) for
// the command name ("console", "matrix"), whose -version prints version
// (VersionLine's, or the Card's build).
func Define(fs *flag.FlagSet, name, version string, need KeyNeed) *Command {
	c := &Command{
		name: name, version: version, need: need, fs: fs,
		key:         cmdflags.KeyFlags(fs, need.usage()),
		log:         cmdflags.LogFlags(fs),
		metrics:     cmdflags.MetricsFlags(fs),
		showVersion: fs.Bool("version", false, "print the version (module version and VCS revision) and exit"),
	}
	c.Say = plain(os.Stderr)
	return c
}

func plain(w io.Writer) func(slog.Level, string, ...any) {
	return func(_ slog.Level, text string, _ ...any) { fmt.Fprintln(w, text) }
}

// Main parses the command line (os.Args[1:]). With -version it prints
// the version on stdout and returns. Otherwise it sets Say and Logger,
// reads the API key (refused when weak, or missing with KeyRequired) and
// the metrics token, and calls run. An error from any of these is said
// as "NAME: ERROR" on stderr (a JSON object with -log-format json), and
// the process exits 1.
func (c *Command) Main(run func() error) {
	if err := c.start(os.Args[1:], os.Stdout, os.Stderr, run); err != nil {
		c.Say(slog.LevelError, c.name+": "+err.Error())
		os.Exit(1)
	}
}

// start is Main but for the exit, on the given arguments and outputs.
func (c *Command) start(args []string, stdout, stderr io.Writer, run func() error) error {
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if *c.showVersion {
		_, err := fmt.Fprintln(stdout, c.version)
		return err
	}
	c.stderr = stderr
	c.Say = c.log.Say(stderr)
	var err error
	if c.Logger, err = c.log.Logger(stderr); err != nil {
		return err
	}
	c.key.Log = c.Logger
	if c.APIKey, err = c.key.Read(); err != nil {
		return err
	}
	if c.APIKey == "" && c.need == KeyRequired {
		return errors.New("no API key: set " + cmdflags.KeyEnv + " or give -api-key-file FILE; it is the key xAgent sends as Authorization: Bearer")
	}
	if c.MetricsToken, err = c.metrics.Token(); err != nil {
		return err
	}
	return run()
}

// Started writes the start line "NAME: starting" whatever -log-level
// filters: the version, attrs (the command's own settings), then whether
// an API key and a metrics token are set (never what they are), the
// metrics address and the log level.
func (c *Command) Started(attrs ...any) {
	attrs = append([]any{"version", c.version}, attrs...)
	attrs = append(attrs, "api_key", cmdflags.Given(c.APIKey), "metrics_addr", c.MetricsAddr(),
		"metrics_token", cmdflags.Given(c.MetricsToken), "log_level", c.log.Level())
	c.log.Lines(c.stderr).Info(c.name+": starting", attrs...)
}

// MetricsAddr is -metrics-addr: "" when not set.
func (c *Command) MetricsAddr() string { return c.metrics.Addr() }

// WatchKey, with an API key, reloads it from its file on SIGHUP until
// ctx ends (cmdflags.Key.Watch), handing it to set.
func (c *Command) WatchKey(ctx context.Context, set func(key string) error) {
	if c.APIKey != "" {
		c.key.Watch(ctx, set)
	}
}
