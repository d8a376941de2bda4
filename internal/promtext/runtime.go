package promtext

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The Go series carry client_golang's Go collector names, so the
// dashboards written for it read them unchanged.

// runtimeSamples are the runtime/metrics read at each scrape.
var runtimeSamples = []string{
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/gc/heap/allocs:bytes",
	"/gc/heap/objects:objects",
	"/gc/heap/goal:bytes",
	"/memory/classes/total:bytes",
}

// RegisterGo registers the Go runtime's basic series: goroutines,
// threads, heap and memory, GC pauses and the Go version.
func (r *Registry) RegisterGo() {
	r.Func(writeGo)
}

func writeGo(w *Writer) {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, n := range runtimeSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	val := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return float64(s[i].Value.Uint64())
		}
		return 0 // not supported by this Go version
	}
	gauge := func(name, help string, v float64) {
		w.Family(name, help, "gauge")
		w.Sample(name, nil, v)
	}
	gauge("go_goroutines", "Number of goroutines that currently exist.", val(0))
	threads, _ := runtime.ThreadCreateProfile(nil)
	gauge("go_threads", "Number of OS threads created.", float64(threads))
	w.Family("go_info", "Information about the Go environment.", "gauge")
	w.Sample("go_info", []string{"version", runtime.Version()}, 1)
	gauge("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use.", val(1))
	w.Family("go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already.", "counter")
	w.Sample("go_memstats_alloc_bytes_total", nil, val(3))
	gauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", val(1))
	gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes in use by spans.", val(1)+val(2))
	gauge("go_memstats_heap_objects", "Number of currently allocated objects.", val(4))
	gauge("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", val(5))
	gauge("go_memstats_sys_bytes", "Number of bytes obtained from system.", val(6))

	// GC pauses as client_golang reports them: a summary of the recent
	// pauses (min, quartiles, max), their total and the GC count.
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	w.Family("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", "summary")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		w.Sample("go_gc_duration_seconds", []string{"quantile", q}, gc.PauseQuantiles[i].Seconds())
	}
	w.Sample("go_gc_duration_seconds_sum", nil, gc.PauseTotal.Seconds())
	w.Sample("go_gc_duration_seconds_count", nil, float64(gc.NumGC))
}

// RegisterBuildInfo registers NAME_build_info, 1, labelled with what
// debug.ReadBuildInfo says the binary was built from: the main module's
// path and version, the VCS revision and whether the tree was modified,
// the Go version, and the version of module sdk (the SDK, as a
// dependency of the binary, or its main module).
func (r *Registry) RegisterBuildInfo(name, sdk string) {
	labels := []string{"path", "", "version", "", "revision", "", "modified", "", "goversion", runtime.Version(), "sdk_version", ""}
	if info, ok := debug.ReadBuildInfo(); ok {
		labels[1], labels[3], labels[9] = info.Main.Path, info.Main.Version, info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				labels[5] = s.Value
			case "vcs.modified":
				labels[7] = s.Value
			}
		}
		if info.Main.Path == sdk {
			labels[11] = info.Main.Version
		}
		for _, d := range info.Deps {
			if d.Path == sdk {
				labels[11] = d.Version
			}
		}
	}
	r.Func(func(w *Writer) {
		w.Family(name, "What the binary was built from (debug.ReadBuildInfo); always 1.", "gauge")
		w.Sample(name, labels, 1)
	})
}
