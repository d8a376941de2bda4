//go:build unix

package benchcpu

import (
	"testing"
	"time"
)

// TestProcessCPU_Grows: burning CPU for a while moves the process's CPU
// time forward.
func TestProcessCPU_Grows(t *testing.T) {
	before, ok := processCPU()
	if !ok {
		t.Fatal("getrusage failed")
	}
	start := time.Now()
	x := 0
	for time.Since(start) < 30*time.Millisecond {
		for i := range 1000 {
			x += i
		}
	}
	after, _ := processCPU()
	if after <= before {
		t.Fatalf("CPU time did not move: %v then %v (%d)", before, after, x)
	}
}
