// Command telegram runs the Telegram reference Connector: a Telegram bot
// whose private chats and groups are xAgent channels, each bound by a
// pairing code the user sends with /start (or every channel to one chat,
// -chat). See README.md.
//
//	XAGENT_API_KEY=… telegram -token-file /run/secrets/bot-token -public-url https://connector.example.org
//
// The API key may also come from -api-key or -api-key-file; SIGTERM drains
// the replies in progress (connector.Connector.Shutdown) before it exits.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdrun"
)

// Set at build time: go build -ldflags "-X main.buildTime=$(date -u +%y%m%d%H%M)".
var (
	buildTime = "dev"
	gitTag    = ""
)

// serverEnv names the Bot API server when -server is not given.
const serverEnv = "TELEGRAM_API_URL"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "telegram:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the Connector on")
	state := flag.String("state", "telegram-state", "directory for channel bindings, draft handles and delivery state")
	tokenFile := flag.String("token-file", "", "file holding the bot's token from BotFather (required)")
	server := flag.String("server", "", "base URL of the Bot API server (default $"+serverEnv+", else "+tgbridge.DefaultServer+")")
	chat := flag.String("chat", "", "bind every channel to this chat ID; default: each channel pairs with a chat by /start CODE")
	public := flag.String("public-url", "", "the Connector's base URL as users reach it, for file links where the server takes no files")
	webhook := flag.String("webhook-url", "", "take updates by webhook at this URL (https://HOST/PATH; PATH is served on -listen behind your TLS) instead of long polling; its secret is made anew at each start")
	mode := flag.String("mode", "auto", "how a streamed reply shows: auto (drafts where the server has sendMessageDraft, else edits), edit or buffer")
	keyFlags := cmdflags.KeyFlags(flag.CommandLine, `the key xAgent sends as "Authorization: Bearer KEY" on /ws, /health and /files/uploads (never /metrics: see -metrics-addr); required, from this flag, -api-key-file or $`+cmdflags.KeyEnv)
	logFlags := cmdflags.LogFlags(flag.CommandLine)
	metricsFlags := cmdflags.MetricsFlags(flag.CommandLine)
	version := flag.Bool("version", false, "print the version (module version and VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println(cmdrun.VersionLine("telegram", tgbridge.Version))
		return nil
	}
	say := logFlags.Say(os.Stderr)
	log, err := logFlags.Logger(os.Stderr)
	if err != nil {
		return err
	}
	keyFlags.Log = log
	key, err := keyFlags.Read()
	if err != nil {
		return err
	}
	if key == "" {
		return errors.New("no API key: set " + cmdflags.KeyEnv + " or give -api-key-file FILE; it is the key xAgent sends as Authorization: Bearer")
	}
	if *tokenFile == "" {
		return errors.New("no bot token: give -token-file FILE")
	}
	token, warning, err := cmdflags.ReadSecretFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("-token-file: %w", err)
	}
	if warning != "" {
		log.Warn("-token-file: " + warning)
	}
	metricsToken, err := metricsFlags.Token()
	if err != nil {
		return err
	}
	modes := map[string]connector.Mode{"auto": connector.ModeAuto, "edit": connector.ModeEdit, "buffer": connector.ModeBuffer}
	m, ok := modes[*mode]
	if !ok {
		return fmt.Errorf("-mode %q: auto, edit or buffer", *mode)
	}
	// The start line: the version and the settings that matter, never a
	// secret (whether a key or token is set, not what it is).
	logFlags.Lines(os.Stderr).Info("telegram: starting", "version", cmdrun.VersionLine("telegram", tgbridge.Version),
		"listen", *listen, "state", *state, "server", cmp.Or(*server, os.Getenv(serverEnv), tgbridge.DefaultServer),
		"chat", *chat, "webhook_url", *webhook, "mode", *mode, "api_key", cmdflags.Given(key), "metrics_addr", metricsFlags.Addr(),
		"metrics_token", cmdflags.Given(metricsToken), "log_level", logFlags.Level())
	b, err := tgbridge.New(tgbridge.Config{Build: cmdrun.Build(tgbridge.Version, gitTag, buildTime),
		APIKey: key, MetricsToken: metricsToken, Token: strings.TrimSpace(token), Server: cmp.Or(*server, os.Getenv(serverEnv)),
		Webhook: *webhook, Chat: *chat, PublicURL: strings.TrimRight(*public, "/"), StateDir: *state, Mode: m, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	return cmdrun.Serve(b.Connector(), cmdrun.Serving{Name: "telegram", Addr: *listen, Card: tgbridge.CardID, MonitorAddr: metricsFlags.Addr(), Say: say})
}
