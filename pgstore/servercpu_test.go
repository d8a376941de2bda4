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
// take both readings while the Store's connections are open. The child
// processes named in skip (a benchmark's replicas, children of this
// process too) and their descendants are not counted.
func serverCPU(skip ...int) (time.Duration, bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return 0, false
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
	return time.Duration(descendantTicks(procs, os.Getpid(), skip)) * time.Second / clockTicks, true
}

// proc is a process of /proc/<pid>/stat: its parent and its CPU ticks.
type proc struct {
	ppid  int
	ticks int64
}

// descendantTicks sums the ticks of root's descendants in procs (by pid),
// root's own left out, and those of the processes in skip and their
// descendants left out too.
func descendantTicks(procs map[int]proc, root int, skip []int) int64 {
	mine := map[int]bool{root: true}
	skipped := map[int]bool{}
	for _, pid := range skip {
		skipped[pid] = true
	}
	for grew := true; grew; {
		grew = false
		for pid, p := range procs {
			if !mine[pid] && !skipped[pid] && mine[p.ppid] {
				mine[pid], grew = true, true
			}
		}
	}
	var ticks int64
	for pid := range mine {
		if pid != root {
			ticks += procs[pid].ticks
		}
	}
	return ticks
}

// measureServerCPU reports the server's CPU time per b.N as
// pg-cpu-ns/op, like benchcpu.Measure does for this process; skip is
// serverCPU's.
func measureServerCPU(b *testing.B, skip ...int) (report func()) {
	start, ok := serverCPU(skip...)
	return func() {
		end, ok2 := serverCPU(skip...)
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "pg-cpu-ns/op")
		}
	}
}

// TestDescendantTicks: the server's CPU is its processes' below the test
// binary, a benchmark's replica children and their descendants not
// counted, nor processes outside the tree.
func TestDescendantTicks(t *testing.T) {
	procs := map[int]proc{
		1:  {0, 1000}, // init
		10: {1, 7},    // the test binary
		11: {10, 100}, // the postmaster
		12: {11, 20},  // a backend
		13: {11, 3},   // the WAL writer
		20: {10, 500}, // a replica child
		21: {20, 50},  // a child of the replica
		30: {1, 900},  // a process outside the tree
	}
	for _, tc := range []struct {
		skip []int
		want int64
	}{
		{nil, 100 + 20 + 3 + 500 + 50},
		{[]int{20}, 100 + 20 + 3},
		{[]int{20, 99}, 100 + 20 + 3},
	} {
		if got := descendantTicks(procs, 10, tc.skip); got != tc.want {
			t.Errorf("skip %v: %d ticks, want %d", tc.skip, got, tc.want)
		}
	}
}
