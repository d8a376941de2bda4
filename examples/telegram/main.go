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
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve the Connector on")
	state := flag.String("state", "telegram-state", "directory for channel bindings, draft handles and delivery state")
	tokenFile := flag.String("token-file", "", "file holding the bot's token from BotFather (required)")
	server := flag.String("server", "", "base URL of the Bot API server (default $"+serverEnv+", else "+tgbridge.DefaultServer+")")
	chat := flag.String("chat", "", "bind every channel to this chat ID; default: each channel pairs with a chat by /start CODE")
	public := flag.String("public-url", "", "the Connector's base URL as users reach it, for file links where the server takes no files")
	webhook := flag.String("webhook-url", "", "take updates by webhook at this URL (https://HOST/PATH; PATH is served on -listen behind your TLS) instead of long polling; its secret is made anew at each start")
	mode := flag.String("mode", "auto", "how a streamed reply shows: auto (drafts where the server has sendMessageDraft, else edits), edit or buffer")
	cmd := cmdrun.Define(flag.CommandLine, "telegram", cmdrun.VersionLine("telegram", tgbridge.Version), cmdrun.KeyRequired)
	cmd.Main(func() error {
		if *tokenFile == "" {
			return errors.New("no bot token: give -token-file FILE")
		}
		token, warning, err := cmdflags.ReadSecretFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("-token-file: %w", err)
		}
		if warning != "" {
			cmd.Logger.Warn("-token-file: " + warning)
		}
		modes := map[string]connector.Mode{"auto": connector.ModeAuto, "edit": connector.ModeEdit, "buffer": connector.ModeBuffer}
		m, ok := modes[*mode]
		if !ok {
			return fmt.Errorf("-mode %q: auto, edit or buffer", *mode)
		}
		cmd.Started("listen", *listen, "state", *state, "server", cmp.Or(*server, os.Getenv(serverEnv), tgbridge.DefaultServer),
			"chat", *chat, "webhook_url", *webhook, "mode", *mode)
		b, err := tgbridge.New(tgbridge.Config{Build: cmdrun.Build(tgbridge.Version, gitTag, buildTime),
			APIKey: cmd.APIKey, MetricsToken: cmd.MetricsToken, Token: strings.TrimSpace(token), Server: cmp.Or(*server, os.Getenv(serverEnv)),
			Webhook: *webhook, Chat: *chat, PublicURL: strings.TrimRight(*public, "/"), StateDir: *state, Mode: m, Logger: cmd.Logger})
		if err != nil {
			return err
		}
		defer func() { _ = b.Close() }()
		return cmd.Serve(b.Connector(), *listen, tgbridge.CardID)
	})
}
