package main

import (
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "quickstart", main, "-h")
	cmdtest.CheckHelp(t, cmd, "usage: quickstart", "takes no flags")
}
