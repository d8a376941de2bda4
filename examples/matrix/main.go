// Command matrix runs the Matrix reference Connector: one Matrix room per
// xAgent channel. See README.md.
//
//	XAGENT_API_KEY=… matrix -listen 127.0.0.1:8080 -state ./state
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/protocol"
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
	keyFlags := cmdflags.KeyFlags(flag.CommandLine, `the key xAgent sends as "Authorization: Bearer KEY" on /ws, /health and /files/uploads; required, from this flag, -api-key-file or $`+cmdflags.KeyEnv)
	logFlags := cmdflags.LogFlags(flag.CommandLine)
	version := flag.Bool("version", false, "print the version (module version and VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println(versionLine())
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
	b, err := matrixbridge.New(matrixbridge.Config{Build: build(), APIKey: key, StateDir: *state, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "matrix: listening on %s (card %s)\n", *listen, matrixbridge.CardID)
	served := make(chan error, 1)
	// Served without ctx: a signal drains first (Shutdown), and only its
	// Close ends serving, so the acks of the drained finals still leave.
	go func() { served <- b.Connector().ListenAndServe(context.Background(), *listen) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), connector.DefaultShutdownGrace)
	defer cancel()
	d, err := b.Connector().Shutdown(sctx)
	fmt.Fprintf(os.Stderr, "matrix: stopped: %s\n", d)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return <-served
}

// versionLine is what -version prints: the bridge's version, the module
// version and VCS revision the binary was built from, when recorded.
func versionLine() string {
	line := "matrix " + matrixbridge.Version
	if info, ok := debug.ReadBuildInfo(); ok {
		line += " module " + info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				line += " " + s.Key + "=" + s.Value
			}
		}
	}
	return line
}

// build fills the Card's build member from the linker flags and the
// module's build info.
func build() protocol.Build {
	b := protocol.Build{Version: matrixbridge.Version, GitTag: gitTag, BuildTime: buildTime}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				b.GitRev = s.Value[:7]
			}
		}
	}
	return b
}
