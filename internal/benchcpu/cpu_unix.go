//go:build unix

package benchcpu

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time of the process.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return durationOf(int64(ru.Utime.Sec), int64(ru.Utime.Usec)) + durationOf(int64(ru.Stime.Sec), int64(ru.Stime.Usec)), true
}

// durationOf converts a timeval's seconds and microseconds to a Duration.
func durationOf(sec, usec int64) time.Duration {
	return time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond
}
