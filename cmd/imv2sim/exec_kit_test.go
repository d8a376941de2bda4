package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConform_K2_K12_ExecKitBinaryWithItsEventsFlag: a Connector binary
// built with connector.New (testdata/kitconnector) passes `imv2sim
// conform -exec` with one flag of its own, -events
// (Options.Advanced.Events = os.Stdout): the kit writes what the platform
// showed, and the author wrote no observer. Without the flag the checks
// that observe the platform fail, so the pass is the stream's doing.
func TestConform_K2_K12_ExecKitBinaryWithItsEventsFlag(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "kitconnector")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/kitconnector").CombinedOutput()
	require.NoError(t, err, "%s", out)
	// The checks that observe the platform: finals, drafts, their order,
	// files, typing; the whole suite passes too (41 of 43, 2 not
	// applicable), in about 15 s.
	observed := `^K(2\.[abde]|3\.b|8\.a|9\.b|12\.[abd])$`
	var table, log bytes.Buffer
	err = conform(context.Background(), []string{"-exec", bin + " -events", "-activity-timeout", "1s", "-run", observed}, &table, &log)
	require.NoError(t, err, "%s\n%s", table.String(), log.String())
	require.Contains(t, table.String(), "10 passed, 0 failed, 0 skipped")

	table.Reset()
	err = conform(context.Background(), []string{"-exec", bin, "-wait", "1s", "-run", `^K3\.b$`}, &table, &log)
	require.Error(t, err, "without -events nothing is observed, yet K3.b passed:\n%s", table.String())
	require.Contains(t, table.String(), "K3.b")
	require.Contains(t, table.String(), "FAIL")
}
