package testwait

import (
	"testing"
	"time"
)

func TestRecv_ReturnsTheSentValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, time.Minute); got != 7 {
		t.Fatalf("Recv = %d, want 7", got)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper()               {}
func (f *fatalRecorder) Fatalf(string, ...any) { f.failed = true }

func TestRecv_FailsAtTheBound(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	Recv(rec, make(chan int), time.Millisecond)
	if !rec.failed {
		t.Fatal("Recv on a silent channel did not fail the test")
	}
}
