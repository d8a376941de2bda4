// Command matrix runs the Matrix reference Connector: one Matrix room per
// xAgent channel. See README.md.
//
//	XAGENT_API_KEY=… matrix -listen 127.0.0.1:8080 -state ./state
package main

import (
	"errors"
	"flag"
	"fmt"
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

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "matrix:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the Connector on")
	state := flag.String("state", "matrix-state", "directory for bindings (access tokens, mode 0600) and delivery state")
	keyFlags := cmdflags.KeyFlags(flag.CommandLine, `the key xAgent sends as "Authorization: Bearer KEY" on /ws, /health and /files/uploads, and a scraper on /metrics; required, from this flag, -api-key-file or $`+cmdflags.KeyEnv)
	private := flag.Bool("private-homeservers", false, "let media downloads reach homeservers on loopback or private addresses (default: public addresses only)")
	logFlags := cmdflags.LogFlags(flag.CommandLine)
	version := flag.Bool("version", false, "print the version (module version and VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println(cmdrun.VersionLine("matrix", matrixbridge.Version))
		return nil
	}

	key, err := keyFlags.Read()
	if err != nil {
		return err
	}
	if key == "" {
		return errors.New("no API key: set " + cmdflags.KeyEnv + " or give -api-key-file FILE; it is the key xAgent sends as Authorization: Bearer")
	}
	log, err := logFlags.Logger(os.Stderr)
	if err != nil {
		return err
	}
	b, err := matrixbridge.New(matrixbridge.Config{Build: cmdrun.Build(matrixbridge.Version, gitTag, buildTime), APIKey: key, StateDir: *state, Logger: log, PrivateHomeservers: *private})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	return cmdrun.Serve("matrix", b.Connector(), *listen, matrixbridge.CardID, os.Stderr)
}
