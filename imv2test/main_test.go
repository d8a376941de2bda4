package imv2test_test

import (
	"os"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

// consoleBinary is the console example built for this run (with -race
// under -race).
var consoleBinary string

func TestMain(m *testing.M) {
	os.Exit(cmdtest.BuildAndRun(m, "../examples/console", "console", &consoleBinary))
}
