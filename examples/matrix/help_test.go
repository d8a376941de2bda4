package main

import (
	"testing"

	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "matrix-connector", main, "-h")
	cmdtest.CheckHelp(t, cmd, "Usage of matrix-connector", "-listen", "-state", "-api-key-file", "XAGENT_API_KEY", "-allow-weak-key", "-log-level", "-log-format",
		"-metrics-addr", "-metrics-token-file", "XAGENT_METRICS_TOKEN", "never /metrics", "-private-homeservers")
}

// -version prints the bridge's and the module's version and exits 0,
// without XAGENT_API_KEY.
func TestVersion_PrintsVersionAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "matrix-connector", main, "-version")
	cmd.Env = append(cmd.Env, "XAGENT_API_KEY=")
	cmdtest.CheckHelp(t, cmd, "matrix "+matrixbridge.Version, "module ")
}
