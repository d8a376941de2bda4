// Command console is an IM Connector whose platform is the terminal.
//
//	go run ./examples/console [flags]
//	  -addr host:port    listen address (default 127.0.0.1:8787; port 0 picks a free one)
//	  -api-key KEY       when set, /ws, /health and /files/uploads need "Authorization: Bearer KEY"
//	  -mode MODE         stream | edit | buffer (default stream)
//	  -json              print every target side effect on stdout as one JSON object per line
//	  -ack-timeout DUR   wait this long for xAgent's ack before resending a user message (default 10s)
//	  -store DIR         keep pending and completed state durably in DIR
//
// At start it prints exactly one line "listening on http://HOST:PORT" to
// stderr, and without -store a second one warning that its state is in
// memory: after a restart xAgent's resend of a final whose ack was lost is
// printed a second time. Each stdin line is one user message; "/file PATH"
// sends a file.
package main

import (
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
	apiKey := flag.String("api-key", "", `when set, /ws, /health and /files/uploads need "Authorization: Bearer KEY"`)
	mode := flag.String("mode", "stream", "stream | edit | buffer")
	jsonOut := flag.Bool("json", false, "print every target side effect on stdout as one JSON object per line")
	ackTimeout := flag.Duration("ack-timeout", 0, "wait this long for xAgent's ack before resending a user message (default 10s)")
	store := flag.String("store", "", "keep pending and completed state durably in DIR, one per console; without it state is in memory and a restart may show a final twice")
	verbose := flag.Bool("v", false, "log diagnostics to stderr")
	flag.Parse()

	modes := map[string]connector.Mode{"stream": connector.ModeStream, "edit": connector.ModeEdit, "buffer": connector.ModeBuffer}
	m, ok := modes[*mode]
	if !ok {
		return fmt.Errorf("-mode %q: want stream, edit or buffer", *mode)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, err := consolebridge.New(consolebridge.Config{
		Addr: *addr, JSON: *jsonOut, StoreDir: *store, Out: os.Stdout,
		Options: connector.Options{APIKey: *apiKey, Mode: m, Logger: logger, Advanced: connector.Advanced{Channel: &imv2.Options{AckTimeout: *ackTimeout}}},
	})
	if err != nil {
		return err
	}
	defer b.Close()
	url, err := b.Start()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "listening on %s\n", url)
	if *store == "" {
		fmt.Fprintln(os.Stderr, memoryWarning)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go b.Run(ctx, os.Stdin) // the end of stdin does not stop serving; a signal does
	<-ctx.Done()
	return nil
}
