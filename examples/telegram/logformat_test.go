package main

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdflags"
	"github.com/xagentkit/imv2/internal/cmdtest"
)

// TestLogFormatJSON_ErrorIsAnObject: with -log-format json a start that
// fails (no bot token) says why in one JSON object, as every other
// stderr line, and exits 1.
func TestLogFormatJSON_ErrorIsAnObject(t *testing.T) {
	cmd := cmdtest.Main(t, "telegram-connector", main, "-log-format", "json")
	cmd.Env = append(cmd.Env, cmdflags.KeyEnv+"="+metricsKey, cmdflags.KeyEnv+"_FILE=", cmdflags.MetricsEnv+"=")
	all := cmdtest.StartJSONLines(t, cmd).Rest(t, metricsKey)
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	if len(all) != 1 || all[0].Obj == nil || all[0].Obj["level"] != "ERROR" || all[0].Obj["msg"] != "telegram: no bot token: give -token-file FILE" {
		t.Fatalf("want one ERROR object saying no bot token, got %+v", all)
	}
}
