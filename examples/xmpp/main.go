// Command xmpp runs the XMPP reference Connector: every xAgent channel is
// one XMPP conversation of a bot account, a 1:1 chat or a group chat. See
// README.md.
//
//	XAGENT_API_KEY=… XMPP_PASSWORD=… xmpp -jid bot@example.org -to alice@example.org
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/protocol"
)

// Set at build time: go build -ldflags "-X main.buildTime=$(date -u +%y%m%d%H%M)".
var (
	buildTime = "dev"
	gitTag    = ""
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "xmpp:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the Connector on")
	state := flag.String("state", "xmpp-state", "directory for channel bindings, draft handles and delivery state")
	account := flag.String("jid", "", "the bot account's JID, user@domain (password in XMPP_PASSWORD)")
	to := flag.String("to", "", "the conversation: a contact's JID, or a room's JID with ?join")
	server := flag.String("server", "", "host:port of the XMPP server (default: the JID's domain, from DNS)")
	ca := flag.String("ca", "", "PEM file of the CA (or self-signed certificate) to trust for the server; default the system's")
	verbose := flag.Bool("v", false, "debug logging")
	flag.Parse()

	key := os.Getenv("XAGENT_API_KEY")
	if key == "" {
		return errors.New("set XAGENT_API_KEY: the key xAgent sends as Authorization: Bearer")
	}
	level := map[bool]slog.Level{true: slog.LevelDebug}[*verbose] // else LevelInfo, the zero value
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var tc *tls.Config
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-ca %s: no PEM certificate: %v", *ca, err)
		}
		tc = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	b, err := xmppbridge.New(xmppbridge.Config{Build: build(), APIKey: key, JID: *account, Password: os.Getenv("XMPP_PASSWORD"),
		Server: *server, TLS: tc, Conversation: *to, StateDir: *state, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("xmpp connector listening", "addr", *listen, "card", xmppbridge.CardID)
	return b.Connector().ListenAndServe(ctx, *listen)
}

// build fills the Card's build member from the linker flags and the
// module's build info.
func build() protocol.Build {
	b := protocol.Build{Version: xmppbridge.Version, GitTag: gitTag, BuildTime: buildTime}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				b.GitRev = s.Value[:7]
			}
		}
	}
	return b
}
