package promtext

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRegistry_WritesParsableText: counters, gauges and histograms with
// label values to escape, and the Go, process and build series, parse
// strictly and carry the values recorded.
func TestRegistry_WritesParsableText(t *testing.T) {
	var r Registry
	c := r.Counter("t_events_total", "Events,\nby kind \\ here.", "kind")
	c.With("a").Inc()
	c.With(`q"uote\n` + "\n").Add(2)
	r.Counter("t_plain_total", "No labels, never touched.")
	g := r.Gauge("t_open", "Open things.")
	g.With().Inc()
	g.With().Inc()
	g.With().Dec()
	r.GaugeFunc("t_func", "Computed.", func() float64 { return 7 })
	h := r.Histogram("t_seconds", "Durations.", []float64{0.1, 1}, "outcome")
	for _, v := range []float64{0.05, 0.1, 0.5, 3} {
		h.With("ok").Observe(v)
	}
	r.Histogram("t_empty_seconds", "Never observed.", []float64{1})
	r.RegisterGo()
	r.RegisterProcess()
	r.RegisterBuildInfo("t_build_info", "github.com/xagentkit/imv2")

	s := httptest.NewServer(&r)
	defer s.Close()
	resp, err := http.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != ContentType {
		t.Fatalf("Content-Type %q", ct)
	}
	body := r.Write()
	got, err := Parse(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	want := map[string]float64{
		`t_events_total{kind="a"}`:            1,
		`t_events_total{kind="q\"uote\\n\n"}`: 2,
		`t_plain_total`:                       0,
		`t_open`:                              1,
		`t_func`:                              7,
		`t_seconds_bucket{outcome="ok",le="0.1"}`:      2,
		`t_seconds_bucket{outcome="ok",le="1"}`:        3,
		`t_seconds_bucket{outcome="ok",le="+Inf"}`:     4,
		`t_seconds_count{outcome="ok"}`:                4,
		`t_seconds_sum{outcome="ok"}`:                  3.65,
		`t_empty_seconds_count`:                        0,
		`go_info{version="` + runtime.Version() + `"}`: 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for _, k := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_gc_duration_seconds_count"} {
		if got[k] <= 0 && k != "go_gc_duration_seconds_count" {
			t.Errorf("%s = %v, want > 0", k, got[k])
		}
		if _, ok := got[k]; !ok {
			t.Errorf("no %s", k)
		}
	}
	if runtime.GOOS == "linux" {
		for _, k := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_max_fds", "process_start_time_seconds"} {
			if got[k] <= 0 {
				t.Errorf("%s = %v, want > 0", k, got[k])
			}
		}
		if st, now := got["process_start_time_seconds"], float64(time.Now().Unix()); st > now+1 || st < now-24*3600 {
			t.Errorf("process_start_time_seconds %v is not within the last day", st)
		}
	}
	build := 0
	for k := range got {
		if strings.HasPrefix(k, "t_build_info{") && strings.Contains(k, `goversion="go`) {
			build++
		}
	}
	if build != 1 {
		t.Errorf("%d build_info series", build)
	}
}

// TestParse_RefusesMalformed: the parser the /metrics tests rely on
// refuses what a Prometheus server would.
func TestParse_RefusesMalformed(t *testing.T) {
	for name, text := range map[string]string{
		"bad name":            "1x 1\n",
		"bad label name":      "x{1a=\"v\"} 1\n",
		"bad escape":          "x{a=\"\\t\"} 1\n",
		"unterminated value":  "x{a=\"v} 1\n",
		"no comma":            "x{a=\"v\"b=\"w\"} 1\n",
		"label twice":         "x{a=\"v\",a=\"w\"} 1\n",
		"bad value":           "x one\n",
		"no newline at end":   "x 1",
		"series twice":        "x 1\nx 2\n",
		"type after samples":  "x 1\n# TYPE x gauge\n",
		"two types":           "# TYPE x gauge\n# TYPE x counter\nx 1\n",
		"unknown type":        "# TYPE x meter\nx 1\n",
		"family resumed":      "x 1\ny 1\nx{a=\"b\"} 1\n",
		"negative counter":    "# TYPE x counter\nx -1\n",
		"buckets fall":        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n",
		"no +Inf":             "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 0\n",
		"count not +Inf":      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 2\nh_sum 0\n",
		"le not rising":       "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n",
		"summary no quantile": "# TYPE s summary\ns 1\n",
	} {
		if _, err := Parse([]byte(text)); err == nil {
			t.Errorf("%s: parsed %q", name, text)
		}
	}
	if _, err := Parse([]byte("# a comment\n# HELP x Some help.\n# TYPE x counter\nx{a=\"v\",} 1 1700000000000\n\n")); err != nil {
		t.Errorf("a valid exposition refused: %v", err)
	}
}

// TestVec_WithAllocatesOnlyNewSeries: counting an event of a series that
// exists allocates nothing (the kit counts on every packet).
func TestVec_WithAllocatesOnlyNewSeries(t *testing.T) {
	var r Registry
	c := r.Counter("t_total", "T.", "status", "code")
	h := r.Histogram("t_seconds", "T.", []float64{1}, "outcome")
	c.With("accepted", "").Inc()
	h.With("ok").Observe(1)
	if n := testing.AllocsPerRun(100, func() {
		c.With("accepted", "").Inc()
		h.With("ok").Observe(0.5)
	}); n != 0 {
		t.Fatalf("%v allocations per count", n)
	}
}
