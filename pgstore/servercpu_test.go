package pgstore_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// serverCPU returns the user and system CPU time of the PostgreSQL server
// this process started (the postmaster and every process it forked: the
// backends, the WAL writer, the checkpointer), as /proc tells it; false
// where there is no /proc. A backend that exited is no longer counted, so
// take both readings while the Store's connections are open.
func serverCPU() (time.Duration, bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return 0, false
	}
	type proc struct {
		ppid  int
		ticks int64
	}
	procs := map[int]proc{}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ... utime(14) stime(15); comm may hold spaces.
		s := string(data)
		close := strings.LastIndexByte(s, ')')
		if close < 0 {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, '(')]))
		if err != nil {
			continue
		}
		f := strings.Fields(s[close+1:]) // f[0] is field 3, the state
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		procs[pid] = proc{ppid, ut + st}
	}
	// The server's processes: the descendants of this one.
	mine := map[int]bool{os.Getpid(): true}
	for grew := true; grew; {
		grew = false
		for pid, p := range procs {
			if !mine[pid] && mine[p.ppid] {
				mine[pid], grew = true, true
			}
		}
	}
	var ticks int64
	for pid := range mine {
		if pid != os.Getpid() {
			ticks += procs[pid].ticks
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// measureServerCPU reports the server's CPU time per b.N as
// pg-cpu-ns/op, like benchcpu.Measure does for this process.
func measureServerCPU(b *testing.B) (report func()) {
	start, ok := serverCPU()
	return func() {
		end, ok2 := serverCPU()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "pg-cpu-ns/op")
		}
	}
}
