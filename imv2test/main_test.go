package imv2test_test

import (
	"os"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdtest"
)

// consoleBinary is the console example built with -race for this run.
var consoleBinary string

func TestMain(m *testing.M) {
	os.Exit(cmdtest.BuildAndRun(m, "../examples/console", "console", &consoleBinary))
}
