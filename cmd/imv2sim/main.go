// Command imv2sim is an xAgent simulator for Connector authors.
//
//	imv2sim -connector http://127.0.0.1:8787 [flags]
//
// The API key comes from $XAGENT_API_KEY, -api-key-file FILE or -api-key
// KEY (visible in ps).
// It dials the Connector, says hello, opens a channel and answers every
// user message with chat.activity thinking → tool web_search → a reply
// streamed in deltas → the final → idle. -auth KEY=VALUE signs the channel
// in first (auth.start); -state FILE keeps the xAgent side's state across
// restarts; a Connector that drops is reconnected to; -send N waits for
// acks when the pending store is full. See -help for the flags.
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
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/sim"
)

const simUsage = `usage: imv2sim -connector URL [flags]   (API key: $XAGENT_API_KEY, -api-key-file or -api-key)
       imv2sim conform -h     the conformance suite's own flags
       imv2sim -version

Simulates xAgent against a Connector: hello, a channel, and a streamed
reply with activity to every user message. With -auth it first signs the
channel in (auth.start, then auth.status while pending); with -state it
keeps its channel, unacked finals and handled user messages across its
own restarts. A Connector that drops is reconnected to, not fatal.

`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h asked for the usage, which is printed: success
		}
		fmt.Fprintln(os.Stderr, "imv2sim:", err)
		os.Exit(1)
	}
}

// authInput collects -auth KEY=VALUE flags.
type authInput map[string]string

func (a authInput) String() string { return fmt.Sprint(map[string]string(a)) }

func (a authInput) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	a[k] = val
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "conform" {
		return conform(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("imv2sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), simUsage)
		fs.PrintDefaults()
	}
	connector := fs.String("connector", "", "Connector base URL, e.g. http://127.0.0.1:8787 (required)")
	keys := defineKeyFlags(fs, "API key sent as a bearer token")
	rate := fs.Float64("rate", 20, "deltas per second of a streamed reply (0: as fast as possible)")
	attach := fs.String("attach", "", "upload this file and attach it to every final")
	drop := fs.Float64("drop", 0, "percentage of outbound chat packets to drop")
	dup := fs.Float64("dup", 0, "percentage of outbound chat packets to send twice")
	send := fs.Int("send", 0, "send N scripted assistant messages, wait for their acks, and exit")
	auth := authInput{}
	fs.Var(auth, "auth", "sign the channel in first: an auth.start input field KEY=VALUE (repeat for each field)")
	authFlow := fs.String("auth-flow", "", "the Card's auth flow to run (default: its only flow for im)")
	statePath := fs.String("state", "", "keep the xAgent side's state in this file (and FILE.channels) across restarts")
	version := fs.Bool("version", false, "print the version and exit")
	quiet := fs.Bool("q", false, "do not print what the simulator sees")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version {
		fmt.Fprintln(stdout, versionLine())
		return nil
	}
	if *connector == "" {
		fs.Usage()
		return errors.New("-connector is required")
	}
	apiKey, err := keys.read()
	if err != nil {
		return err
	}

	// The scripted finals not yet acked or failed, by text: unique within
	// a run, and known before the final's message_id is (an ack may come
	// before Reply returns).
	var (
		mu      sync.Mutex
		open    = map[string]bool{}
		settled = make(chan struct{}, 1)
	)
	report := func(m imv2.ChatMessage) {
		mu.Lock()
		if open[m.Text] {
			delete(open, m.Text)
			if len(open) == 0 {
				select {
				case settled <- struct{}{}:
				default:
				}
			}
		}
		mu.Unlock()
	}
	cfg := sim.Config{Connector: *connector, APIKey: apiKey, Rate: *rate, Attach: *attach, Drop: *drop, Duplicate: *dup,
		Options: &imv2.Options{
			OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) { report(m) },
			OnFailed: func(_ string, m imv2.ChatMessage, err *imv2.Error) {
				fmt.Fprintf(stderr, "imv2sim: %s failed: %v\n", m.MessageID, err)
				report(m)
			},
		}}
	if !*quiet {
		cfg.Log = stdout
	}
	if *statePath != "" {
		st, err := openState(*statePath)
		if err != nil {
			return err
		}
		defer st.Close()
		cfg.Options.Pending, cfg.Options.Completed, cfg.Store = st.bolt.Pending(), st.bolt.Completed(), st.channels
	}
	s, err := sim.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if len(auth) > 0 || *authFlow != "" {
		if _, err := s.SignIn(ctx, *authFlow, auth); err != nil {
			return err
		}
	}
	if *send == 0 {
		<-ctx.Done()
		return nil
	}
	texts := make([]string, *send)
	mu.Lock()
	for i := range texts {
		texts[i] = fmt.Sprintf("Scripted message %d of %d.", i+1, *send)
		open[texts[i]] = true
	}
	mu.Unlock()
	for _, text := range texts {
		if err := s.Reply(ctx, s.ChannelID(), text); err != nil {
			return err
		}
	}
	select { // each final ends acked or failed
	case <-settled:
		return nil
	case <-ctx.Done():
		mu.Lock()
		left := len(open)
		mu.Unlock()
		return fmt.Errorf("stopped with %d of %d finals not acknowledged", left, *send)
	}
}

// versionLine is the module version and, when the build recorded it, the
// VCS revision, from the binary's build information.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "imv2sim (no build information)"
	}
	line := "imv2sim " + bi.Main.Version
	var rev, modified string
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			if st.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev != "" {
		line += " " + rev + modified
	}
	return line + " " + bi.GoVersion
}
