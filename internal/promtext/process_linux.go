package promtext

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// RegisterProcess registers the process series client_golang's process
// collector exports, read from /proc/self and getrusage: CPU seconds,
// resident and virtual memory, open and maximum file descriptors, and
// the start time. A series whose source cannot be read is left out of
// that scrape.
func (r *Registry) RegisterProcess() {
	start, startErr := startTime()
	r.Func(func(w *Writer) {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			w.Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter")
			w.Sample("process_cpu_seconds_total", nil, tv(ru.Utime)+tv(ru.Stime))
		}
		if f, err := os.ReadFile("/proc/self/statm"); err == nil {
			if fs := bytes.Fields(f); len(fs) >= 2 {
				page := float64(os.Getpagesize())
				vsz, _ := strconv.ParseFloat(string(fs[0]), 64)
				rss, _ := strconv.ParseFloat(string(fs[1]), 64)
				w.Family("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge")
				w.Sample("process_resident_memory_bytes", nil, rss*page)
				w.Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge")
				w.Sample("process_virtual_memory_bytes", nil, vsz*page)
			}
		}
		if d, err := os.ReadDir("/proc/self/fd"); err == nil {
			w.Family("process_open_fds", "Number of open file descriptors.", "gauge")
			w.Sample("process_open_fds", nil, float64(len(d)-1)) // less the one ReadDir held
		}
		var lim syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
			w.Family("process_max_fds", "Maximum number of open file descriptors.", "gauge")
			w.Sample("process_max_fds", nil, float64(lim.Cur))
		}
		if startErr == nil {
			w.Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge")
			w.Sample("process_start_time_seconds", nil, start)
		}
	})
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// userHZ is the kernel's clock tick for /proc times: 100 on every Linux
// platform Go supports (the procfs library assumes it too).
const userHZ = 100

// startTime reads the process start time: the boot time from /proc/stat
// plus the start tick from /proc/self/stat.
func startTime() (float64, error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis, where field 3 (state) begins.
	i := bytes.LastIndexByte(stat, ')')
	fs := bytes.Fields(stat[i+1:])
	if i < 0 || len(fs) < 20 {
		return 0, os.ErrInvalid
	}
	ticks, err := strconv.ParseFloat(string(fs[19]), 64) // field 22, starttime
	if err != nil {
		return 0, err
	}
	sys, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(sys) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			boot, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
			if err != nil {
				return 0, err
			}
			return boot + ticks/userHZ, nil
		}
	}
	return 0, os.ErrNotExist
}
