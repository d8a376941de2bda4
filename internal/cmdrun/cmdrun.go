// Package cmdrun is what the bridge commands (examples/matrix,
// examples/xmpp) do the same way around their Connector: serve it until
// SIGTERM or SIGINT, drain it, and say what they are built from.
package cmdrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

// Serve listens on addr, writes "NAME: listening on HOST:PORT (card
// CARD)" to w once it does (the real port, for an addr with port 0), and
// serves k until SIGTERM or SIGINT, then drains it
// (connector.Connector.Shutdown, up to DefaultShutdownGrace) and writes one
// line "NAME: stopped: …" to w. It serves without the signal's context, so
// only Shutdown's Close ends serving and the acks of drained finals leave.
func Serve(name string, k *connector.Connector, addr, card string, w io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: listening on %s (card %s)\n", name, ln.Addr(), card)
	served := make(chan error, 1)
	go func() { served <- k.Serve(context.Background(), ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), connector.DefaultShutdownGrace)
	defer cancel()
	d, err := k.Shutdown(sctx)
	fmt.Fprintf(w, "%s: stopped: %s\n", name, d)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return <-served
}

// VersionLine is what -version prints: the command's name and version,
// then the module version and VCS revision the binary was built from,
// when recorded.
func VersionLine(name, version string) string {
	line := name + " " + version
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

// Build is the Card's build member: version, the tag and time set by the
// linker flags, and the short VCS revision when the build recorded one.
func Build(version, gitTag, buildTime string) protocol.Build {
	b := protocol.Build{Version: version, GitTag: gitTag, BuildTime: buildTime}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				b.GitRev = s.Value[:7]
			}
		}
	}
	return b
}
