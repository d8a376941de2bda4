// Package cmdrun is what the bridge commands (examples/matrix,
// examples/xmpp) do the same way around their Connector: serve it until
// SIGTERM or SIGINT, drain it, and say what they are built from.
package cmdrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

// Serving is what Serve serves and how it speaks.
type Serving struct {
	// Name starts each line: "xmpp", "matrix".
	Name string
	// Addr is the Connector's listen address; Card its card ID, named
	// in the listening line.
	Addr, Card string
	// MonitorAddr, when set, also serves /metrics, /livez and /readyz
	// there (connector.Connector.StartMonitor), for a scraper that does
	// not hold xAgent's API key.
	MonitorAddr string
	// Say writes the command's own lines (cmdflags.Log.Say: plain text,
	// or JSON objects with -log-format json).
	Say func(level slog.Level, text string, attrs ...any)
}

// Serve listens on s.Addr (and with s.MonitorAddr serves the monitoring
// address and says "NAME: monitoring on http://HOST:PORT", attr url),
// then says "NAME: listening on HOST:PORT (card CARD)" (the real port,
// for an addr with port 0; attr addr), the last line of the start, and
// serves k until SIGTERM or SIGINT, then drains it
// (connector.Connector.Shutdown, up to DefaultShutdownGrace) and says
// "NAME: stopped: …" (attrs finished, cut, refused). It serves without
// the signal's context, so only Shutdown's Close ends serving and the
// acks of drained finals leave.
func Serve(k *connector.Connector, s Serving) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	if s.MonitorAddr != "" {
		url, err := k.StartMonitor(s.MonitorAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("-metrics-addr: %w", err)
		}
		s.Say(slog.LevelInfo, s.Name+": monitoring on "+url, "url", url)
	}
	// The last line of the start: a reader that waits for it finds both
	// addresses served.
	s.Say(slog.LevelInfo, fmt.Sprintf("%s: listening on %s (card %s)", s.Name, ln.Addr(), s.Card), "addr", ln.Addr().String(), "card", s.Card)
	served := make(chan error, 1)
	go func() { served <- k.Serve(context.Background(), ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.Say(slog.LevelInfo, fmt.Sprintf("%s: stopping; finishing the replies in progress (up to %s)", s.Name, connector.DefaultShutdownGrace), "grace", connector.DefaultShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), connector.DefaultShutdownGrace)
	defer cancel()
	d, err := k.Shutdown(sctx)
	s.Say(slog.LevelInfo, fmt.Sprintf("%s: stopped: %s", s.Name, d), "finished", d.Finished, "cut", d.Cut, "refused", d.Refused)
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
