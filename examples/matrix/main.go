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
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
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
	verbose := flag.Bool("v", false, "debug logging")
	flag.Parse()

	key := os.Getenv("XAGENT_API_KEY")
	if key == "" {
		return errors.New("set XAGENT_API_KEY: the key xAgent sends as Authorization: Bearer")
	}
	level := map[bool]slog.Level{true: slog.LevelDebug}[*verbose] // else LevelInfo, the zero value
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	b, err := matrixbridge.New(matrixbridge.Config{Build: build(), APIKey: key, StateDir: *state, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("matrix connector listening", "addr", *listen, "card", matrixbridge.CardID)
	return b.Connector().ListenAndServe(ctx, *listen)
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
