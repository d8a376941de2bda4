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
	// helloVersion is the suite's HelloVersion; "" is 3.0.
	helloVersion string
}

// consoleModes: the three display modes, then the stream mode again driven
// as today's xAgent, whose hello announces 4.3 (W4).
var consoleModes = []consoleMode{
	{"stream", "conformance-key-of-128-bits", []string{"K5.a", "K6.c", "K12.d"}, ""},
	{"edit", "", []string{"K1.c", "K5.a", "K6.c", "K12.d"}, ""},
	{"buffer", "", []string{"K1.c", "K2.d", "K6.c", "K12.d"}, ""},
	{"stream", "conformance-key-of-128-bits", []string{"K5.a", "K6.c", "K12.d"}, "4.3"},
}

// TestConsole_K1_K12_W4_AllModes runs the Connector suite against the
// console example binary — out of process, observed through its -json
// stdout, driven through its stdin — in its three display modes at once,
// and once more with every hello at 4.3, as the xAgent live today sends.
// Every check passes; the skips are exactly the ones the mode makes
// inapplicable (no API key, a streaming target, TTLs of minutes), so
// nothing is skipped by accident.
func TestConsole_K1_K12_W4_AllModes(t *testing.T) {
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
			reps[i], errs[i] = imv2test.CheckConnector(ctx, c, &imv2test.Config{DeltaStreams: 300, HelloVersion: m.helloVersion})
		})
	}
	concurrently(fs...)
	for i, m := range consoleModes {
		name := m.mode
		if m.helloVersion != "" {
			name += "_W4_hello_" + m.helloVersion
		}
		t.Run(name, func(t *testing.T) {
			require.NoError(t, errs[i])
			t.Logf("console -mode %s:\n%s", m.mode, table(t, reps[i]))
			require.Empty(t, reps[i].Failed(), "stderr:\n%s", procs[i].Stderr())
			require.Equal(t, m.skips, reps[i].Skipped())
		})
	}
}
