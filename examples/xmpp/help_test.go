package main

import (
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-h")
	cmdtest.CheckHelp(t, cmd, "Usage of xmpp-connector", "-listen", "-state", "-jid", "-to", "-server", "-ca")
}
