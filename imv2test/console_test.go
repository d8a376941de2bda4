package imv2test_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/imv2test"
)

// consoleMode is one run of the suite against the console binary.
type consoleMode struct {
	mode, apiKey string
	skips        []string // exactly the checks the mode makes inapplicable
}

var consoleModes = []consoleMode{
	{"stream", "conformance-key", []string{"K5.a", "K6.c", "K12.d"}},
	{"edit", "", []string{"K1.c", "K5.a", "K6.c", "K12.d"}},
	{"buffer", "", []string{"K1.c", "K2.d", "K6.c", "K12.d"}},
}

// TestConsole_K1_K12_ThreeModes runs the Connector suite against the
// console example binary — out of process, observed through its -json
// stdout, driven through its stdin — in its three display modes at once.
// Every check passes; the skips are exactly the ones the mode makes
// inapplicable (no API key, a streaming target, TTLs of minutes), so
// nothing is skipped by accident.
func TestConsole_K1_K12_ThreeModes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	procs := make([]*imv2test.Process, len(consoleModes))
	for i, m := range consoleModes {
		args := []string{"-addr", "127.0.0.1:0", "-json", "-mode", m.mode}
		if m.apiKey != "" {
			args = append(args, "-api-key", m.apiKey)
		}
		p, err := imv2test.StartProcess(ctx, consoleBinary, args...)
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
		procs[i] = p
	}
	reps := make([]*imv2test.Report, len(consoleModes))
	errs := make([]error, len(consoleModes))
	var fs []func()
	for i, m := range consoleModes {
		fs = append(fs, func() {
			c := procs[i].Connector()
			c.APIKey, c.Buffered = m.apiKey, m.mode == "buffer"
			// The console's cap is 256 open streams; probe just above it.
			reps[i], errs[i] = imv2test.CheckConnector(ctx, c, &imv2test.Config{DeltaStreams: 300})
		})
	}
	concurrently(fs...)
	for i, m := range consoleModes {
		t.Run(m.mode, func(t *testing.T) {
			require.NoError(t, errs[i])
			t.Logf("console -mode %s:\n%s", m.mode, table(t, reps[i]))
			require.Empty(t, reps[i].Failed(), "stderr:\n%s", procs[i].Stderr())
			require.Equal(t, m.skips, reps[i].Skipped())
		})
	}
}
