package consolebridge

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/protocol"
)

// TestBuild_H4_StampedFromBuildInfo: the Card's build member comes from
// what the toolchain recorded (a release's module version, the VCS
// revision and time), and stays card.json's where nothing was recorded.
func TestBuild_H4_StampedFromBuildInfo(t *testing.T) {
	base := protocol.Build{Version: "0.1.0", BuildTime: "2026-11-30T00:00:00Z"}
	require.Equal(t, base, stamped(base, nil, false))
	devel := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	require.Equal(t, base, stamped(base, devel, true))
	info := &debug.BuildInfo{
		Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
		},
	}
	require.Equal(t, protocol.Build{Version: "v1.2.3", GitRev: "0123456789ab", BuildTime: "2026-12-01T10:00:00Z"}, stamped(base, info, true))
}
