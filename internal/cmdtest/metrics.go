package cmdtest

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/xagentkit/imv2/internal/cmdflags"
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

// metricsTokenFileEnv passes the token file CheckMetricsApart wrote in
// the parent test to the child copy that runs main (Main), so both give
// main the same arguments and the child leaves no file of its own.
const metricsTokenFileEnv = "IMV2_CMDTEST_METRICS_TOKEN_FILE"

// MetricsStarter starts the command under test with xAgent's API key
// set, env added to its environment (later entries win) and args added to
// its arguments, and returns the base URL of the Connector and, with
// -metrics-addr, of its monitoring address ("" without). The test's
// cleanup stops the command.
type MetricsStarter func(t *testing.T, env []string, args ...string) (base, monitor string)

// CheckMetricsApart fails t unless the command start starts serves
// /metrics apart from xAgent's API key: with -metrics-addr, /metrics is
// open there without a credential (CheckMetrics) and the Connector's
// address answers 404 to the key and to no credential; with a metrics
// token, from -metrics-token-file or $XAGENT_METRICS_TOKEN, the token
// opens /metrics on both addresses and only it (the key and no credential
// get 401). key is the API key start gives the command; token is a
// metrics token of 22 characters or more. While the open instance runs,
// also (if not nil) gets its monitoring URL and samples, for the
// command's own checks.
func CheckMetricsApart(t *testing.T, start MetricsStarter, key, token string, also func(t *testing.T, monitor string, open map[string]float64)) {
	t.Helper()
	t.Run("open", func(t *testing.T) {
		base, monitor := start(t, []string{cmdflags.MetricsEnv + "="}, "-metrics-addr", "127.0.0.1:0")
		if monitor == "" {
			t.Fatal("no monitoring address with -metrics-addr")
		}
		s := CheckMetrics(t, monitor, "")
		wantCount(t, s, "imv2_open_connections", 0)
		wantStatus(t, base, key, http.StatusNotFound, "xAgent's key on the Connector's address")
		wantStatus(t, base, "", http.StatusNotFound, "no credential on the Connector's address")
		if also != nil {
			also(t, monitor, s)
		}
	})
	file := os.Getenv(metricsTokenFileEnv)
	if file == "" { // the parent test, not the child running main
		file = filepath.Join(t.TempDir(), "metrics-token")
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range []string{"file", "env"} {
		t.Run(from, func(t *testing.T) {
			env, args := []string{cmdflags.MetricsEnv + "=" + token}, []string{"-metrics-addr", "127.0.0.1:0"}
			if from == "file" {
				env, args = []string{cmdflags.MetricsEnv + "=", metricsTokenFileEnv + "=" + file}, append(args, "-metrics-token-file", file)
			}
			base, monitor := start(t, env, args...)
			if monitor == "" {
				t.Fatal("no monitoring address with -metrics-addr")
			}
			for _, url := range []string{base, monitor} {
				s := CheckMetrics(t, url, token) // 401 without it
				wantCount(t, s, "imv2_open_connections", 0)
				wantStatus(t, url, key, http.StatusUnauthorized, "xAgent's key")
			}
		})
	}
}

func wantCount(t *testing.T, s map[string]float64, series string, want float64) {
	t.Helper()
	if got, ok := s[series]; !ok || got != want {
		t.Errorf("/metrics %s = %v (present %v), want %v", series, got, ok, want)
	}
}

func wantStatus(t *testing.T, base, bearer string, want int, what string) {
	t.Helper()
	if got := MetricsStatus(t, base, bearer); got != want {
		t.Errorf("%s: GET %s/metrics: %d, want %d", what, base, got, want)
	}
}

// MetricsStatus is the status of GET base/metrics with bearer ("" sends
// none).
func MetricsStatus(t *testing.T, base, bearer string) int {
	t.Helper()
	return Status(t, base+"/metrics", bearer)
}

// Status is the status of GET url with "Authorization: Bearer BEARER"
// ("" sends none).
func Status(t *testing.T, url, bearer string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
