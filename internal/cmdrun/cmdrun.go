// Package cmdrun is what the Connector commands (examples/console,
// examples/matrix, examples/xmpp, examples/telegram) do the same way:
// read their shared flags (Command: the API key, the logs, monitoring,
// -version), write their start line, serve a Connector until SIGTERM or
// SIGINT and drain it (the bridges), and say what they are built from.
// The bridges are modules of their own; they can import this package
// because Go's internal rule goes by import path, and theirs are under
// this module's.
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
	"time"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

// Serve listens on addr (and with -metrics-addr serves the monitoring
// address and says "NAME: monitoring on http://HOST:PORT", attr url),
// then says "NAME: listening on HOST:PORT (card CARD)" (the real port,
// for an addr with port 0; attr addr), the last line of the start, and
// serves k until SIGTERM or SIGINT, then drains it (Drain, with
// connector.DefaultShutdownGrace). It serves without the signal's
// context, so only Shutdown's Close ends serving and the acks of drained
// finals leave. Meanwhile SIGHUP reads the API key file again (WatchKey,
// connector.Connector.SetAPIKey), as -api-key-file's usage says;
// subscribed before the listening line.
func (c *Command) Serve(k *connector.Connector, addr, card string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c.WatchKey(ctx, k.SetAPIKey)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if a := c.MetricsAddr(); a != "" {
		url, err := k.StartMonitor(a)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("-metrics-addr: %w", err)
		}
		c.Say(slog.LevelInfo, c.name+": monitoring on "+url, "url", url)
	}
	// The last line of the start: a reader that waits for it finds both
	// addresses served.
	c.Say(slog.LevelInfo, fmt.Sprintf("%s: listening on %s (card %s)", c.name, ln.Addr(), card), "addr", ln.Addr().String(), "card", card)
	served := make(chan error, 1)
	go func() { served <- k.Serve(context.Background(), ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	if err := c.Drain(k, connector.DefaultShutdownGrace); err != nil {
		return err
	}
	return <-served
}

// Drain stops k as SIGTERM asks: it says "NAME: stopping; …" (attr
// grace), shuts k down (connector.Connector.Shutdown: no new work, the
// replies in progress finished within grace, the rest cut off) and says
// "NAME: stopped: …" (attrs finished, cut, refused). A grace that runs
// out is no error: the cut-off finals are counted in that line.
func (c *Command) Drain(k *connector.Connector, grace time.Duration) error {
	c.Say(slog.LevelInfo, fmt.Sprintf("%s: stopping; finishing the replies in progress (up to %s)", c.name, grace), "grace", grace.String())
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	d, err := k.Shutdown(ctx)
	c.Say(slog.LevelInfo, fmt.Sprintf("%s: stopped: %s", c.name, d), "finished", d.Finished, "cut", d.Cut, "refused", d.Refused)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
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
