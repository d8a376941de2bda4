package main

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/sim"
)

// TestConsole_Metrics_ServedApartFromTheKey: a scraper needs no API key.
// With -metrics-addr the console serves /metrics there without a
// credential, in the text format, with the kit's series: after one user
// line and its reply, the open connection and channel, the user message
// sent and its send→ack latency, the final's ack, and the Go and process
// series. On the Connector's address xAgent's key does not open /metrics
// (404); a -metrics-token-file token does, and only it.
func TestConsole_Metrics_ServedApartFromTheKey(t *testing.T) {
	t.Parallel()
	const key = "console-metrics-key-0123456789"
	p := start(t, "-api-key", key, "-mode", "buffer", "-metrics-addr", "127.0.0.1:0")
	monitor := p.logLine(t, "monitoring on ")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	agent, err := sim.Start(ctx, sim.Config{Connector: p.url, APIKey: key})
	require.NoError(t, err)
	defer agent.Close()
	_, err = io.WriteString(p.stdin, "hello\n")
	require.NoError(t, err)
	var sawFinal, sawSent bool
	p.until(t, func(e consolebridge.Event) bool {
		sawFinal = sawFinal || e.Event == "final"
		sawSent = sawSent || e.Event == "sent"
		return sawFinal && sawSent
	})
	agent.Wait() // the final's ack reached the simulator

	// The ack can reach the simulator before the console counts it: read
	// /metrics again until it has (another process: no clock to drive).
	s := cmdtest.CheckMetrics(t, monitor, "")
	for end := time.Now().Add(10 * time.Second); s[`imv2_acks_sent_total{status="accepted",code=""}`] == 0 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
		s = cmdtest.CheckMetrics(t, monitor, "")
	}
	for k, want := range map[string]float64{
		`imv2_open_connections`:                               1,
		`imv2_open_channels`:                                  1,
		`imv2_messages_sent_total`:                            1,
		`imv2_pending_messages`:                               0,
		`imv2_ack_latency_seconds_count`:                      1,
		`imv2_acks_sent_total{status="accepted",code=""}`:     1,
		`imv2_acks_received_total{status="accepted",code=""}`: 1,
	} {
		require.Contains(t, s, k)
		require.Equal(t, want, s[k], k)
	}
	require.Greater(t, s["go_goroutines"], 0.0)
}

// TestConsole_Metrics_KeyDoesNotOpenThem: xAgent's key never opens
// /metrics (cmdtest.CheckMetricsApart: open on -metrics-addr, 404 on the
// Connector's address; a token from -metrics-token-file or
// $XAGENT_METRICS_TOKEN opens it on both addresses, and only it).
func TestConsole_Metrics_KeyDoesNotOpenThem(t *testing.T) {
	t.Parallel()
	const key = "console-metrics-key-0123456789"
	cmdtest.CheckMetricsApart(t, func(t *testing.T, env []string, args ...string) (base, monitor string) {
		p := startEnv(t, env, append([]string{"-api-key", key}, args...)...)
		if slices.Contains(args, "-metrics-addr") {
			monitor = p.logLine(t, "monitoring on ")
		}
		return p.url, monitor
	}, key, "console-scraper-token-0123456789", nil)
}
