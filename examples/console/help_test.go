package main

import (
	"os/exec"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

// The console binary TestMain built is the command a user runs.
func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	t.Parallel()
	cmdtest.CheckHelp(t, exec.Command(binary, "-h"), "Usage of", "-addr", "-mode", "-store", "-api-key-file", "XAGENT_API_KEY", "-allow-weak-key", "-log-level", "-log-format",
		"state is in memory and a restart may show a final twice")
}

// -version prints the Card's build as stamped into the binary (the VCS
// revision too where the build recorded it: not under -buildvcs=false)
// and exits 0.
func TestVersion_PrintsStampedBuildAndExitsZero(t *testing.T) {
	t.Parallel()
	cmdtest.CheckHelp(t, exec.Command(binary, "-version"), "console 0.1.0", "built ")
}
