// Command xmpp runs the XMPP reference Connector: every xAgent channel is
// one XMPP conversation of a bot account, a 1:1 chat or a group chat. See
// README.md.
//
//	XAGENT_API_KEY=… XMPP_PASSWORD=… xmpp -jid bot@example.org -to alice@example.org
//
// The API key may also come from -api-key or -api-key-file; SIGTERM drains
// the replies in progress (connector.Connector.Shutdown) before it exits.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/internal/cmdflags"
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
	keyFlags := cmdflags.KeyFlags(flag.CommandLine, `the key xAgent sends as "Authorization: Bearer KEY" on /ws, /health and /files/uploads; required, from this flag, -api-key-file or $`+cmdflags.KeyEnv)
	logFlags := cmdflags.LogFlags(flag.CommandLine)
	version := flag.Bool("version", false, "print the version (module version and VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println(versionLine())
		return nil
	}

	key, err := keyFlags.Read()
	if err != nil {
		return err
	}
	if key == "" {
		return errors.New("no API key: set " + cmdflags.KeyEnv + " or give -api-key-file FILE; it is the key xAgent sends as Authorization: Bearer")
	}
	log, err := logFlags.Logger(os.Stderr)
	if err != nil {
		return err
	}
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
	fmt.Fprintf(os.Stderr, "xmpp: listening on %s (card %s)\n", *listen, xmppbridge.CardID)
	served := make(chan error, 1)
	// Served without ctx: a signal drains first (Shutdown), and only its
	// Close ends serving, so the acks of the drained finals still leave.
	go func() { served <- b.Connector().ListenAndServe(context.Background(), *listen) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), connector.DefaultShutdownGrace)
	defer cancel()
	d, err := b.Connector().Shutdown(sctx)
	fmt.Fprintf(os.Stderr, "xmpp: stopped: %s\n", d)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return <-served
}

// versionLine is what -version prints: the bridge's version, the module
// version and VCS revision the binary was built from, when recorded.
func versionLine() string {
	line := "xmpp " + xmppbridge.Version
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
