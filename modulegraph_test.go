package imv2_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// matrixOnlyModules are the Matrix example's dependencies. The example is a
// module of its own (examples/matrix/go.mod) so that none of them reaches a
// program that imports the SDK.
var matrixOnlyModules = []string{"maunium.net/go/mautrix", "go.mau.fi/", "github.com/rs/zerolog", "github.com/tidwall/", "github.com/matrix-org/"}

// TestModuleGraph_ImporterSeesNoMatrixDependency builds the module graph a
// fresh importer of the SDK gets (a go.mod requiring the SDK, replaced by this
// checkout) and fails when a Matrix-only module is in it, e.g. after a root
// package imported mautrix or the root go.mod grew a stray requirement.
func TestModuleGraph_ImporterSeesNoMatrixDependency(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the module graph: %v", err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/fresh\n\ngo 1.26\n\nrequire github.com/xagentkit/imv2 v0.0.0\n\nreplace github.com/xagentkit/imv2 => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	// The SDK's go.sum holds the go.mod hash of every module in its graph, so
	// the listing needs no network.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "list", "-m", "all")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all in a fresh importer: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/xagentkit/imv2 v0.0.0 => ") {
		t.Fatalf("the fresh importer's graph lacks the SDK itself:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, bad := range matrixOnlyModules {
			if strings.HasPrefix(line, bad) {
				t.Errorf("an importer of the SDK gets the Matrix-only module %q", line)
			}
		}
	}
}
