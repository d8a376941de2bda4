package main

import (
	"testing"

	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-h")
	cmdtest.CheckHelp(t, cmd, "Usage of xmpp-connector", "-listen", "-state", "-jid", "-to", "-server", "-ca",
		"-api-key-file", "XAGENT_API_KEY", "-password-file", "XMPP_PASSWORD_FILE", "-allow-weak-key", "-log-level", "-log-format", "-version")
}

// -version prints the bridge's and the module's version and exits 0,
// without XAGENT_API_KEY.
func TestVersion_PrintsVersionAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-version")
	cmd.Env = append(cmd.Env, "XAGENT_API_KEY=")
	cmdtest.CheckHelp(t, cmd, "xmpp "+xmppbridge.Version, "module ")
}
