package main

import (
	"os/exec"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

// The console binary TestMain built is the command a user runs.
func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmdtest.CheckHelp(t, exec.Command(binary, "-h"), "Usage of", "-addr", "-mode", "-store", "state is in memory and a restart may show a final twice")
}
