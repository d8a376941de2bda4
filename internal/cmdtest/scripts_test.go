package cmdtest_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

// TestScripts_HelpPrintsUsageAndExitsZero runs every script in scripts/
// with -h: each prints its usage and exits 0 instead of starting work
// (a build of Dendrite, a benchmark run).
func TestScripts_HelpPrintsUsageAndExitsZero(t *testing.T) {
	for script, want := range map[string]string{
		"dendrite.sh":       "Usage: scripts/dendrite.sh [port]",
		"bench.sh":          "scripts/bench.sh               # COUNT rounds",
		"bench-telegram.sh": "scripts/bench-telegram.sh                       # 100 chats",
	} {
		t.Run(script, func(t *testing.T) {
			for _, flag := range []string{"-h", "--help"} {
				cmdtest.CheckHelp(t, exec.Command("bash", filepath.Join("..", "..", "scripts", script), flag), want)
			}
		})
	}
	matches, err := filepath.Glob(filepath.Join("..", "..", "scripts", "*.sh"))
	if err != nil || len(matches) != 3 {
		t.Errorf("scripts/*.sh = %v (%v); give every new script a -h and a row above", matches, err)
	}
}
