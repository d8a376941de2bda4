// Command console is an IM Connector whose platform is the terminal.
//
//	go run ./examples/console [flags]
//	  -addr host:port    listen address (default 127.0.0.1:8787; port 0 picks a free one)
//	  -api-key KEY       when set, /ws, /health, /files/uploads and /metrics need "Authorization: Bearer KEY"
//	  -api-key-file FILE the key from a file, one line (a container secret, mode 600); SIGHUP reads it
//	                     again, the old key valid 10 min more; or set XAGENT_API_KEY
//	  -allow-weak-key    for testing only: accept a key under 128 bits (22 characters) or a guessable one
//	  -mode MODE         stream | edit | buffer (default stream)
//	  -json              print every target side effect on stdout as one JSON object per line
//	  -ack-timeout DUR   wait this long for xAgent's ack before resending a user message (default 10s)
//	  -store DIR         keep pending and completed state durably in DIR
//	  -log-level LEVEL   debug | info | warn | error (default warn); -v is -log-level debug
//	  -log-format FMT    text | json (default text)
//	  -version           print the version (module version, VCS revision) and exit
//
// At start it prints exactly one line "listening on http://HOST:PORT" to
// stderr (log lines, warnings and errors by default, may come before it),
// and without -store a second one warning that its state is in
// memory: after a restart xAgent's resend of a final whose ack was lost is
// printed a second time. Each stdin line is one user message; "/file PATH"
// sends a file. SIGTERM or SIGINT stops it gracefully
// (connector.Connector.Shutdown): no new work, the replies in progress
// finished within 25 s, then one line "console: stopped: …" with what was
// drained, and exit 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/cmdflags"
)

// memoryWarning is printed at start without -store (S8).
const memoryWarning = "console: warning: state is in memory; after a restart a final whose ack was lost is shown a second time and pending messages are lost; run with -store DIR to keep it"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8787", "listen address; port 0 picks a free one")
	keyFlags := cmdflags.KeyFlags(flag.CommandLine, `when set, /ws, /health, /files/uploads and /metrics need "Authorization: Bearer KEY"`)
	logFlags := cmdflags.LogFlags(flag.CommandLine)
	mode := flag.String("mode", "stream", "stream | edit | buffer")
	jsonOut := flag.Bool("json", false, "print every target side effect on stdout as one JSON object per line")
	ackTimeout := flag.Duration("ack-timeout", 0, "wait this long for xAgent's ack before resending a user message (default 10s)")
	store := flag.String("store", "", "keep pending and completed state durably in DIR, one per console; without it state is in memory and a restart may show a final twice")
	version := flag.Bool("version", false, "print the version (module version and VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println(consolebridge.VersionLine())
		return nil
	}

	logger, err := logFlags.Logger(os.Stderr)
	if err != nil {
		return err
	}
	keyFlags.Log = logger
	key, err := keyFlags.Read()
	if err != nil {
		return err
	}
	modes := map[string]connector.Mode{"stream": connector.ModeStream, "edit": connector.ModeEdit, "buffer": connector.ModeBuffer}
	m, ok := modes[*mode]
	if !ok {
		return fmt.Errorf("-mode %q: want stream, edit or buffer", *mode)
	}
	b, err := consolebridge.New(consolebridge.Config{
		Addr: *addr, JSON: *jsonOut, StoreDir: *store, Out: os.Stdout,
		Options: connector.Options{APIKey: key, Mode: m, Logger: logger, Advanced: connector.Advanced{Channel: &imv2.Options{AckTimeout: *ackTimeout}}},
	})
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if key != "" {
		// SIGHUP reads the key file again, the old key valid for
		// connector.APIKeyGrace; subscribed before "listening on".
		keyFlags.Watch(ctx, b.SetAPIKey)
	}
	url, err := b.Start()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "listening on %s\n", url)
	if *store == "" {
		fmt.Fprintln(os.Stderr, memoryWarning)
	}

	go b.Run(ctx, os.Stdin) // the end of stdin does not stop serving; a signal does
	<-ctx.Done()
	return drain(b)
}

// drain stops b as a SIGTERM asks: no new work, the finals in the
// platform's hands finished within connector.DefaultShutdownGrace, then
// one line saying what was drained.
func drain(b *consolebridge.Bridge) error {
	fmt.Fprintf(os.Stderr, "console: stopping; finishing the replies in progress (up to %s)\n", connector.DefaultShutdownGrace)
	ctx, cancel := context.WithTimeout(context.Background(), connector.DefaultShutdownGrace)
	defer cancel()
	d, err := b.Shutdown(ctx)
	fmt.Fprintf(os.Stderr, "console: stopped: %s\n", d)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // the cut-off finals are counted in the line above
	}
	return err
}
