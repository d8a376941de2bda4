package benchcpu

import (
	"os"
	"testing"
)

func TestParseIO(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		r, w   int64
		wantOK bool
	}{
		{"proc", "rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 0\n", 3, 4, true},
		{"no syscw", "rchar: 10\nsyscr: 3\n", 3, 0, false},
		{"garbage", "syscr: x\nsyscw: 4\n", 0, 4, false},
		{"empty", "", 0, 0, false},
	} {
		r, w, ok := parseIO([]byte(tc.in))
		if ok != tc.wantOK || (ok && (r != tc.r || w != tc.w)) {
			t.Errorf("%s: got %d, %d, %v; want %d, %d, %v", tc.name, r, w, ok, tc.r, tc.w, tc.wantOK)
		}
	}
}

// TestProcessIO_CountsWrites: a write(2) moves the count of writes.
func TestProcessIO_CountsWrites(t *testing.T) {
	_, before, ok := processIO()
	if !ok {
		t.Fatal("/proc/self/io not readable")
	}
	f, err := os.CreateTemp(t.TempDir(), "io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 10 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	_, after, _ := processIO()
	if after-before < 10 {
		t.Fatalf("10 writes counted as %d", after-before)
	}
}
