// Command xmpp runs the XMPP reference Connector: every xAgent channel is
// one XMPP conversation of a bot account, a 1:1 chat or a group chat. See
// README.md.
//
//	XAGENT_API_KEY=… XMPP_PASSWORD=… xmpp -jid bot@example.org -to alice@example.org
//
// The API key may also come from -api-key or -api-key-file; it never
// opens /metrics: -metrics-addr serves /metrics, /livez and /readyz on an
// address of their own, and -metrics-token-file (or $XAGENT_METRICS_TOKEN)
// is a scraper's credential. At start it writes "xmpp: starting" with the
// version and the settings (never a secret), then "xmpp: listening on …";
// with -log-format json every stderr line is a JSON object. SIGTERM drains
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
	"net/url"
	"os"
	"strings"

	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdrun"
)

// Set at build time: go build -ldflags "-X main.buildTime=$(date -u +%y%m%d%H%M)".
var (
	buildTime = "dev"
	gitTag    = ""
)

// hostList is -file-host: host[:port]s, the flag repeated or a comma list.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

// Set adds each host of a comma list; a URL, a path or an empty item is
// refused (the hosts are compared with a file URL's host as they are).
func (h *hostList) Set(v string) error {
	for _, host := range strings.Split(v, ",") {
		host = strings.TrimSpace(host)
		if u, err := url.Parse("http://" + host); host == "" || err != nil || u.Host != host {
			return fmt.Errorf("%q: want host or host:port, as in the upload service's URLs", host)
		}
		*h = append(*h, host)
	}
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the Connector on")
	state := flag.String("state", "xmpp-state", "directory for channel bindings, draft handles and delivery state")
	account := flag.String("jid", "", "the bot account's JID, user@domain (password from -password-file, $XMPP_PASSWORD_FILE or $XMPP_PASSWORD)")
	passFile := flag.String("password-file", "", "read the bot account's password from FILE (one line, a container secret); default $XMPP_PASSWORD_FILE, else $XMPP_PASSWORD")
	to := flag.String("to", "", "the conversation: a contact's JID, or a room's JID with ?join")
	server := flag.String("server", "", "host:port of the XMPP server (default: the JID's domain, from DNS)")
	ca := flag.String("ca", "", "PEM file of the CA (or self-signed certificate) to trust for the server; default the system's")
	var fileHosts hostList
	flag.Var(&fileHosts, "file-host", "a host[:port] shared files are downloaded from (the upload service's URLs; every redirect hop too); repeat it or give a comma list (default: the upload service's JID, upload.DOMAIN)")
	privateFileHosts := flag.Bool("private-file-hosts", false, "let the -file-host hosts be on loopback or private addresses (an upload service on this machine or network; default: public addresses only)")
	cmd := cmdrun.Define(flag.CommandLine, "xmpp", cmdrun.VersionLine("xmpp", xmppbridge.Version), cmdrun.KeyRequired)
	cmd.Main(func() error {
		cmd.Started("listen", *listen, "state", *state, "jid", *account, "to", *to, "server", cmp.Or(*server, "DNS"), "ca", cmp.Or(*ca, "system"),
			"file_hosts", cmp.Or(fileHosts.String(), "upload service"), "private_file_hosts", *privateFileHosts)
		password, err := readPassword(*passFile, cmd.Logger)
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
			APIKey: cmd.APIKey, MetricsToken: cmd.MetricsToken, JID: *account, Password: password,
			Server: *server, TLS: tc, Conversation: *to, StateDir: *state, Logger: cmd.Logger,
			FileHosts: fileHosts, PrivateFileHosts: *privateFileHosts})
		if err != nil {
			return err
		}
		defer func() { _ = b.Close() }()
		// A password the server refuses is the operator's to fix: say so
		// and exit, rather than serve a Connector that can never sign in.
		// An unreachable server is not that: the bridge keeps trying, not
		// ready.
		ctx, cancel := context.WithTimeout(context.Background(), xmppbridge.DefaultDialTimeout)
		err = b.SignIn(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return cmd.Serve(b.Connector(), *listen, xmppbridge.CardID)
	})
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
