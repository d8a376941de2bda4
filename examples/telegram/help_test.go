package main

import (
	"testing"

	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "telegram-connector", main, "-h")
	cmdtest.CheckHelp(t, cmd, "Usage of telegram-connector", "-listen", "-state", "-token-file", "-server", "TELEGRAM_API_URL",
		"-chat", "-webhook-url", "-public-url", "-mode", "-api-key-file", "XAGENT_API_KEY", "-allow-weak-key", "-log-level", "-log-format", "-version", "-metrics-addr", "-metrics-token-file")
}

// -version prints the bridge's and the module's version and exits 0,
// without XAGENT_API_KEY.
func TestVersion_PrintsVersionAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "telegram-connector", main, "-version")
	cmd.Env = append(cmd.Env, "XAGENT_API_KEY=")
	cmdtest.CheckHelp(t, cmd, "telegram "+tgbridge.Version, "module ")
}
