// Command matrix runs the Matrix reference Connector: one Matrix room per
// xAgent channel. See README.md.
//
//	XAGENT_API_KEY=… matrix -listen 127.0.0.1:8080 -state ./state
//
// The API key never opens /metrics: -metrics-addr serves /metrics,
// /livez and /readyz on an address of their own, and -metrics-token-file
// (or $XAGENT_METRICS_TOKEN) is a scraper's credential. At start it
// writes "matrix: starting" with the version and the settings (never a
// secret), then "matrix: listening on …"; with -log-format json every
// stderr line is a JSON object.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdrun"
)

// Set at build time: go build -ldflags "-X main.buildTime=$(date -u +%y%m%d%H%M)".
var (
	buildTime = "dev"
	gitTag    = ""
)

// say writes the command's own lines: plain text until the flags are
// read, then in the -log-format asked for (cmdflags.Log.Say).
var say = func(_ slog.Level, text string, _ ...any) { fmt.Fprintln(os.Stderr, text) }

func main() {
	if err := run(); err != nil {
		say(slog.LevelError, "matrix: "+err.Error())
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the Connector on")
	state := flag.String("state", "matrix-state", "directory for bindings (access tokens, mode 0600) and delivery state")
	keyFlags := cmdflags.KeyFlags(flag.CommandLine, `the key xAgent sends as "Authorization: Bearer KEY" on /ws, /health and /files/uploads (never /metrics: see -metrics-addr); required, from this flag, -api-key-file or $`+cmdflags.KeyEnv)
	private := flag.Bool("private-homeservers", false, "let media downloads reach homeservers on loopback or private addresses (default: public addresses only)")
	logFlags := cmdflags.LogFlags(flag.CommandLine)
	metricsFlags := cmdflags.MetricsFlags(flag.CommandLine)
	version := flag.Bool("version", false, "print the version (module version and VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println(cmdrun.VersionLine("matrix", matrixbridge.Version))
		return nil
	}

	say = logFlags.Say(os.Stderr)
	log, err := logFlags.Logger(os.Stderr)
	if err != nil {
		return err
	}
	keyFlags.Log = log
	key, err := keyFlags.Read()
	if err != nil {
		return err
	}
	if key == "" {
		return errors.New("no API key: set " + cmdflags.KeyEnv + " or give -api-key-file FILE; it is the key xAgent sends as Authorization: Bearer")
	}
	metricsToken, err := metricsFlags.Token()
	if err != nil {
		return err
	}
	// The start line: the version and the settings that matter, never a
	// secret (whether a key or token is set, not what it is).
	logFlags.Lines(os.Stderr).Info("matrix: starting", "version", cmdrun.VersionLine("matrix", matrixbridge.Version),
		"listen", *listen, "state", *state, "private_homeservers", *private, "api_key", cmdflags.Given(key),
		"metrics_addr", metricsFlags.Addr(), "metrics_token", cmdflags.Given(metricsToken), "log_level", logFlags.Level())
	b, err := matrixbridge.New(matrixbridge.Config{Build: cmdrun.Build(matrixbridge.Version, gitTag, buildTime),
		APIKey: key, MetricsToken: metricsToken, StateDir: *state, Logger: log, PrivateHomeservers: *private})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	return cmdrun.Serve(b.Connector(), cmdrun.Serving{Name: "matrix", Addr: *listen, Card: matrixbridge.CardID, MonitorAddr: metricsFlags.Addr(), Say: say})
}
