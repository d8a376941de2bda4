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
	"flag"

	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
	"github.com/xagentkit/imv2/internal/cmdrun"
)

// Set at build time: go build -ldflags "-X main.buildTime=$(date -u +%y%m%d%H%M)".
var (
	buildTime = "dev"
	gitTag    = ""
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the Connector on")
	state := flag.String("state", "matrix-state", "directory for bindings (access tokens, mode 0600) and delivery state")
	private := flag.Bool("private-homeservers", false, "let media downloads reach homeservers on loopback or private addresses (default: public addresses only)")
	cmd := cmdrun.Define(flag.CommandLine, "matrix", cmdrun.VersionLine("matrix", matrixbridge.Version), cmdrun.KeyRequired)
	cmd.Main(func() error {
		cmd.Started("listen", *listen, "state", *state, "private_homeservers", *private)
		b, err := matrixbridge.New(matrixbridge.Config{Build: cmdrun.Build(matrixbridge.Version, gitTag, buildTime),
			APIKey: cmd.APIKey, MetricsToken: cmd.MetricsToken, StateDir: *state, Logger: cmd.Logger, PrivateHomeservers: *private})
		if err != nil {
			return err
		}
		defer func() { _ = b.Close() }()
		return cmd.Serve(b.Connector(), *listen, matrixbridge.CardID)
	})
}
