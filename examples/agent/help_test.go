package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "agent", main, "-h")
	cmdtest.CheckHelp(t, cmd, "usage: agent -url URL", "-state")
}

// TestHelp_NoURLExitsTwo: without -url the agent prints its usage and
// exits 2, dialing nothing.
func TestHelp_NoURLExitsTwo(t *testing.T) {
	cmd := cmdtest.Main(t, "agent", main)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "usage: agent") {
		t.Fatalf("want usage and exit status 2, got %v:\n%s", err, out)
	}
}
