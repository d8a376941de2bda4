package consolebridge

import (
	"runtime/debug"

	"github.com/xagentkit/imv2/protocol"
)

// stamped is base (card.json's build member) with what the Go toolchain
// recorded in the binary: the module version when it is a release, the
// VCS revision and commit time. A build without them (go test, a source
// tree without VCS) keeps base.
func stamped(base protocol.Build, info *debug.BuildInfo, ok bool) protocol.Build {
	if !ok {
		return base
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		base.Version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			base.GitRev = s.Value[:min(len(s.Value), 12)]
		case "vcs.time":
			base.BuildTime = s.Value
		}
	}
	return base
}

// VersionLine is what the console's -version prints: the Card's build
// member as stamped into this binary.
func VersionLine() string {
	b := Card().Build
	line := "console " + b.Version
	if b.GitRev != "" {
		line += " vcs.revision=" + b.GitRev
	}
	return line + " built " + b.BuildTime
}
