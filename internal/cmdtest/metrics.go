package cmdtest

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/xagentkit/imv2/internal/promtext"
)

// MetricFamilies are the families every kit Connector serves at /metrics
// by default (connector's package doc lists them); ProcessFamilies are
// added on Linux.
var (
	MetricFamilies = []string{
		"imv2_events_total", "imv2_messages_sent_total", "imv2_resends_total",
		"imv2_pending_messages", "imv2_waiting_messages", "imv2_acks_received_total",
		"imv2_acks_sent_total", "imv2_deltas_rejected_total", "imv2_target_call_duration_seconds",
		"imv2_ack_latency_seconds", "imv2_store_errors_total", "imv2_open_connections",
		"imv2_open_channels", "imv2_listener_failures_total", "imv2_build_info",
		"go_goroutines", "go_threads", "go_info", "go_memstats_heap_alloc_bytes",
		"go_memstats_heap_objects", "go_memstats_sys_bytes", "go_gc_duration_seconds",
	}
	ProcessFamilies = []string{
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
		"process_max_fds", "process_start_time_seconds",
	}
)

// CheckMetrics reads base's /metrics as Prometheus would: it fails t
// unless the endpoint refuses a request without key (401; with key "",
// an endpoint open without a credential is asked) and answers one with it
// in the text format, parsed strictly (promtext.Parse), with
// every family of MetricFamilies (and ProcessFamilies on Linux) and a
// build_info naming the Go version. It returns the samples by series.
func CheckMetrics(t *testing.T, base, key string) map[string]float64 {
	t.Helper()
	if key != "" {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("/metrics without the key: %s, want 401", resp.Status)
		}
	}
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != promtext.ContentType {
		t.Fatalf("/metrics: %s, Content-Type %q:\n%s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	series, err := promtext.Parse(body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	want := MetricFamilies
	if runtime.GOOS == "linux" {
		want = append(want[:len(want):len(want)], ProcessFamilies...)
	}
	for _, f := range want {
		if !strings.Contains(string(body), "\n# TYPE "+f+" ") && !strings.HasPrefix(string(body), "# TYPE "+f+" ") {
			t.Errorf("/metrics has no family %s", f)
		}
	}
	build := false
	for k := range series {
		build = build || (strings.HasPrefix(k, "imv2_build_info{") && strings.Contains(k, `goversion="go`))
	}
	if !build {
		t.Errorf("/metrics has no imv2_build_info with the Go version:\n%s", body)
	}
	return series
}
