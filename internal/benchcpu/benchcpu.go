// Package benchcpu reports the CPU time a benchmark spent per operation,
// next to the wall time that `go test -bench` measures.
//
// On a machine shared with other work, wall time per op grows with the
// load while CPU time per op stays close to the cost of the code. The
// benchmarks of this module report both (unit cpu-ns/op), so an SDK path
// and its baseline can be compared even when the load moved between them.
package benchcpu

import "testing"

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
