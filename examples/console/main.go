// Command console is an IM Connector whose platform is the terminal.
//
//	go run ./examples/console [flags]
//	  -addr host:port    listen address (default 127.0.0.1:8787; port 0 picks a free one)
//	  -api-key KEY       when set, /ws, /health and /files/uploads need "Authorization: Bearer KEY" (never /metrics)
//	  -api-key-file FILE the key from a file, one line (a container secret, mode 600); SIGHUP reads it
//	                     again, the old key valid 10 min more; or set XAGENT_API_KEY
//	  -allow-weak-key    for testing only: accept a key under 128 bits (22 characters) or a guessable one
//	  -mode MODE         stream | edit | buffer (default stream)
//	  -json              print every target side effect on stdout as one JSON object per line
//	  -ack-timeout DUR   wait this long for xAgent's ack before resending a user message (default 10s)
//	  -store DIR         keep pending and completed state durably in DIR
//	  -shutdown-grace DUR on SIGTERM, finish the replies in progress for up to DUR (default 25s), then cut off the rest and exit
//	  -log-level LEVEL   debug | info | warn | error (default warn); -v is -log-level debug
//	  -log-format FMT    text | json (default text): with json every stderr line is a JSON object
//	  -metrics-addr ADDR  also serve /metrics, /livez and /readyz on ADDR, open there unless a metrics token is set
//	  -metrics-token-file FILE  the token a scraper sends for /metrics (or $XAGENT_METRICS_TOKEN); the API key never opens /metrics
//	  -version           print the version (module version, VCS revision) and exit
//
// At start it writes a start line to stderr ("console: starting" with
// the version and the settings, never a secret), then exactly one line
// "listening on http://HOST:PORT" (log lines, warnings and errors by
// default, may come before it; with -log-format json it is a JSON object
// whose msg is that text and whose url is the URL), with -metrics-addr a
// line "monitoring on http://HOST:PORT", and without -store one warning that its state is in
// memory: after a restart xAgent's resend of a final whose ack was lost is
// printed a second time. Each stdin line is one user message; "/file PATH"
// sends a file. SIGTERM or SIGINT stops it gracefully
// (connector.Connector.Shutdown): no new work, the replies in progress
// finished within -shutdown-grace (25 s), then one line "console: stopped: …"
// with what was drained, and exit 0 — within the grace plus
// connector.CutWait even when a post never returns (cut off: its claim
// stays in -store, and xAgent's resend after the restart is answered
// delivery_outcome_unknown, never shown twice).
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/cmdrun"
)

// memoryWarning is printed at start without -store (S8).
const memoryWarning = "console: warning: state is in memory; after a restart a final whose ack was lost is shown a second time and pending messages are lost; run with -store DIR to keep it"

func main() {
	addr := flag.String("addr", "127.0.0.1:8787", "listen address; port 0 picks a free one")
	mode := flag.String("mode", "stream", "stream | edit | buffer")
	jsonOut := flag.Bool("json", false, "print every target side effect on stdout as one JSON object per line")
	ackTimeout := flag.Duration("ack-timeout", 0, "wait this long for xAgent's ack before resending a user message (default 10s)")
	store := flag.String("store", "", "keep pending and completed state durably in DIR, one per console; without it state is in memory and a restart may show a final twice")
	grace := flag.Duration("shutdown-grace", connector.DefaultShutdownGrace, "on SIGTERM, let the replies in progress finish for up to DUR, then cut off what is still running and exit (keep it under the orchestrator's kill timeout)")
	cmd := cmdrun.Define(flag.CommandLine, "console", consolebridge.VersionLine(), cmdrun.KeyOptional)
	cmd.Main(func() error {
		modes := map[string]connector.Mode{"stream": connector.ModeStream, "edit": connector.ModeEdit, "buffer": connector.ModeBuffer}
		m, ok := modes[*mode]
		if !ok {
			return fmt.Errorf("-mode %q: want stream, edit or buffer", *mode)
		}
		b, err := consolebridge.New(consolebridge.Config{
			Addr: *addr, JSON: *jsonOut, StoreDir: *store, Out: os.Stdout,
			Options: connector.Options{APIKey: cmd.APIKey, Mode: m, Logger: cmd.Logger, Advanced: connector.Advanced{
				Channel: &imv2.Options{AckTimeout: *ackTimeout}, MetricsToken: cmd.MetricsToken,
			}},
		})
		if err != nil {
			return err
		}
		defer b.Close()
		cmd.Started("addr", *addr, "mode", *mode, "store", cmp.Or(*store, "memory"),
			"shutdown_grace", grace.String(), "ack_timeout", ackTimeout.String(), "json_events", *jsonOut)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		// SIGHUP reads the key file again, the old key valid for
		// connector.APIKeyGrace; subscribed before "listening on".
		cmd.WatchKey(ctx, b.SetAPIKey)
		url, err := b.Start()
		if err != nil {
			return err
		}
		cmd.Say(slog.LevelInfo, "listening on "+url, "url", url)
		if a := cmd.MetricsAddr(); a != "" {
			murl, err := b.StartMonitor(a)
			if err != nil {
				return fmt.Errorf("-metrics-addr: %w", err)
			}
			cmd.Say(slog.LevelInfo, "monitoring on "+murl, "url", murl)
		}
		if *store == "" {
			cmd.Say(slog.LevelWarn, memoryWarning)
		}

		go b.Run(ctx, os.Stdin) // the end of stdin does not stop serving; a signal does
		<-ctx.Done()
		return cmd.Drain(b.Connector, *grace)
	})
}
