package cmdrun

import (
	"strings"
	"testing"
)

// TestVersionLine_NamesTheCommandAndTheModule: the line starts with the
// command's name and version and names the module version.
func TestVersionLine_NamesTheCommandAndTheModule(t *testing.T) {
	got := VersionLine("xmpp", "1.2.3")
	if !strings.HasPrefix(got, "xmpp 1.2.3 module ") {
		t.Fatalf("VersionLine = %q", got)
	}
}

// TestBuild_KeepsWhatTheLinkerSet: the linker's tag and time and the
// given version reach the Card's build member as they are.
func TestBuild_KeepsWhatTheLinkerSet(t *testing.T) {
	b := Build("1.2.3", "v1.2.3", "2612021200")
	if b.Version != "1.2.3" || b.GitTag != "v1.2.3" || b.BuildTime != "2612021200" {
		t.Fatalf("Build = %+v", b)
	}
}
