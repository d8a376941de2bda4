//go:build unix

package e2e

import (
	"os"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

// bin is the telegram command, built with -race for the crash test.
var bin string

func TestMain(m *testing.M) { os.Exit(cmdtest.BuildAndRun(m, "..", "telegram", &bin)) }
