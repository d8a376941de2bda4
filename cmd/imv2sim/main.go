// Command imv2sim is an xAgent simulator for Connector authors.
//
//	imv2sim -connector http://127.0.0.1:8787 [-api-key KEY] [flags]
//
// It dials the Connector, says hello, opens a channel and answers every
// user message with chat.activity thinking → tool web_search → a reply
// streamed in deltas → the final → idle. See -help for the flags.
//
//	imv2sim conform -connector URL [-api-key KEY] [-json] [flags]
//
// runs the conformance suite (package imv2test) against the Connector,
// prints a table of checks K1–K12 and exits non-zero on any failure; see
// imv2sim conform -help.
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
	"github.com/xagentkit/imv2/sim"
)

const simUsage = `usage: imv2sim -connector URL [-api-key KEY] [flags]
       imv2sim conform -h     the conformance suite's own flags

Simulates xAgent against a Connector: hello, a channel, and a streamed
reply with activity to every user message.

`

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h asked for the usage, which is printed: success
		}
		fmt.Fprintln(os.Stderr, "imv2sim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "conform" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return conform(ctx, args[1:], os.Stdout, os.Stderr)
	}
	fs := flag.NewFlagSet("imv2sim", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), simUsage)
		fs.PrintDefaults()
	}
	connector := fs.String("connector", "", "Connector base URL, e.g. http://127.0.0.1:8787 (required)")
	apiKey := fs.String("api-key", "", "API key sent as a bearer token")
	rate := fs.Float64("rate", 20, "deltas per second of a streamed reply (0: as fast as possible)")
	attach := fs.String("attach", "", "upload this file and attach it to every final")
	drop := fs.Float64("drop", 0, "percentage of outbound chat packets to drop")
	dup := fs.Float64("dup", 0, "percentage of outbound chat packets to send twice")
	send := fs.Int("send", 0, "send N scripted assistant messages, wait for their acks, and exit")
	quiet := fs.Bool("q", false, "do not print what the simulator sees")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *connector == "" {
		fs.Usage()
		return errors.New("-connector is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	done := make(chan struct{}, max(*send, 1))
	report := func() {
		select {
		case done <- struct{}{}:
		default:
		}
	}
	cfg := sim.Config{Connector: *connector, APIKey: *apiKey, Rate: *rate, Attach: *attach, Drop: *drop, Duplicate: *dup,
		Options: &imv2.Options{
			OnDelivered: func(string, imv2.ChatMessage, imv2.AckStatus) { report() },
			OnFailed: func(_ string, m imv2.ChatMessage, err *imv2.Error) {
				fmt.Fprintf(os.Stderr, "imv2sim: %s failed: %v\n", m.MessageID, err)
				report()
			},
		}}
	if !*quiet {
		cfg.Log = os.Stdout
	}
	s, err := sim.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if *send == 0 {
		<-ctx.Done()
		return nil
	}
	for i := 1; i <= *send; i++ {
		if err := s.Reply(ctx, s.Channel().ID(), fmt.Sprintf("Scripted message %d of %d.", i, *send)); err != nil {
			return err
		}
	}
	for range *send { // each final ends acked or failed
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
