package main

import (
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "imv2sim", main, "-h")
	cmdtest.CheckHelp(t, cmd, "usage: imv2sim -connector URL", "-connector", "-rate", "-auth", "-state", "-version", "imv2sim conform -h")
}

func TestHelp_ConformPrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "imv2sim", main, "conform", "-h")
	cmdtest.CheckHelp(t, cmd, "usage: imv2sim conform", "-exec", "-list")
}
