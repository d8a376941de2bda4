//go:build !unix

package benchcpu

import "time"

// processCPU reports that CPU time is not measured on this platform.
func processCPU() (time.Duration, bool) { return 0, false }
