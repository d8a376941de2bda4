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
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdrun"
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
	account := flag.String("jid", "", "the bot account's JID, user@domain (password from -password-file, $XMPP_PASSWORD_FILE or $XMPP_PASSWORD)")
	passFile := flag.String("password-file", "", "read the bot account's password from FILE (one line, a container secret); default $XMPP_PASSWORD_FILE, else $XMPP_PASSWORD")
	to := flag.String("to", "", "the conversation: a contact's JID, or a room's JID with ?join")
	server := flag.String("server", "", "host:port of the XMPP server (default: the JID's domain, from DNS)")
	ca := flag.String("ca", "", "PEM file of the CA (or self-signed certificate) to trust for the server; default the system's")
	keyFlags := cmdflags.KeyFlags(flag.CommandLine, `the key xAgent sends as "Authorization: Bearer KEY" on /ws, /health and /files/uploads, and a scraper on /metrics; required, from this flag, -api-key-file or $`+cmdflags.KeyEnv)
	logFlags := cmdflags.LogFlags(flag.CommandLine)
	version := flag.Bool("version", false, "print the version (module version and VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println(cmdrun.VersionLine("xmpp", xmppbridge.Version))
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
	password, err := readPassword(*passFile, log)
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
	b, err := xmppbridge.New(xmppbridge.Config{Build: cmdrun.Build(xmppbridge.Version, gitTag, buildTime),
		APIKey: key, JID: *account, Password: password,
		Server: *server, TLS: tc, Conversation: *to, StateDir: *state, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	// A password the server refuses is the operator's to fix: say so and
	// exit, rather than serve a Connector that can never sign in. An
	// unreachable server is not that: the bridge keeps trying, not ready.
	ctx, cancel := context.WithTimeout(context.Background(), xmppbridge.DefaultDialTimeout)
	err = b.SignIn(ctx)
	cancel()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return cmdrun.Serve("xmpp", b.Connector(), *listen, xmppbridge.CardID, os.Stderr)
}

// readPassword is the bot account's password: from file (-password-file),
// else the file $XMPP_PASSWORD_FILE names, else $XMPP_PASSWORD. A file
// is read bounded, one line; a group- or world-readable one is warned
// about.
func readPassword(file string, log *slog.Logger) (string, error) {
	file = cmp.Or(file, os.Getenv("XMPP_PASSWORD_FILE"))
	if file == "" {
		return os.Getenv("XMPP_PASSWORD"), nil
	}
	pw, warn, err := cmdflags.ReadSecretFile(file)
	if err != nil {
		return "", fmt.Errorf("the XMPP password file: %w", err)
	}
	if warn != "" {
		log.Warn("xmpp: the XMPP password file: " + warn)
	}
	return pw, nil
}
