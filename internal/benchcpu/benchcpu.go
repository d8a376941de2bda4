// Package benchcpu reports the CPU time a benchmark spent per operation,
// next to the wall time that `go test -bench` measures, and, for the
// network benchmarks, the read and write system calls per operation.
//
// On a machine shared with other work, wall time per op grows with the
// load while CPU time per op stays close to the cost of the code. The
// benchmarks of this module report both (unit cpu-ns/op), so an SDK path
// and its baseline can be compared even when the load moved between them.
// The system calls (units reads/op and writes/op, from /proc/self/io on
// Linux) show what write coalescing saves: every read(2)/write(2) of the
// process counts, the sockets' and the epoll eventfd's alike.
package benchcpu

import (
	"testing"
	"time"
)

// Measure starts measuring the process's CPU time (user and system, every
// goroutine and the garbage collector included). Call the returned func
// right after the timed loop: it reports the CPU time per b.N as
// cpu-ns/op. Where the platform cannot tell CPU time, nothing is reported.
func Measure(b *testing.B) (report func()) {
	start, ok := processCPU()
	return func() {
		end, ok2 := processCPU()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// ProcessCPU returns the process's user and system CPU time so far, or
// false where the platform cannot tell it: for a benchmark whose work runs
// in child processes, which report their own CPU time to the parent.
func ProcessCPU() (time.Duration, bool) { return processCPU() }

// MeasureSyscalls is Measure, and it also reports the read(2) and
// write(2) calls of the process per b.N as reads/op and writes/op, where
// the platform counts them (Linux).
func MeasureSyscalls(b *testing.B) (report func()) {
	cpu := Measure(b)
	r0, w0, ok := processIO()
	return func() {
		cpu()
		r1, w1, ok2 := processIO()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/op")
			b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/op")
		}
	}
}
