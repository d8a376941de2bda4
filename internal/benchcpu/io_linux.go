package benchcpu

import (
	"bytes"
	"os"
	"strconv"
)

// processIO returns the read and write system calls the process made so
// far (syscr and syscw of /proc/self/io).
func processIO() (reads, writes int64, ok bool) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0, false
	}
	return parseIO(data)
}

// parseIO reads syscr and syscw out of a /proc/<pid>/io text.
func parseIO(data []byte) (reads, writes int64, ok bool) {
	var haveR, haveW bool
	for line := range bytes.Lines(data) {
		name, value, found := bytes.Cut(bytes.TrimSpace(line), []byte(": "))
		if !found {
			continue
		}
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			continue
		}
		switch string(name) {
		case "syscr":
			reads, haveR = n, true
		case "syscw":
			writes, haveW = n, true
		}
	}
	return reads, writes, haveR && haveW
}
