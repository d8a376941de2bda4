//go:build !linux

package benchcpu

// processIO reports that system calls are not counted on this platform.
func processIO() (reads, writes int64, ok bool) { return 0, 0, false }
