// Package testwait holds the one way the SDK's tests wait for a value that
// another goroutine sends: with a bound, failing the test at the bound
// instead of hanging the run. The bound is a guard against a hang, never a
// measured time.
package testwait

import (
	"testing"
	"time"
)

// Recv returns the next value from ch, or fails t after within.
func Recv[T any](t testing.TB, ch <-chan T, within time.Duration) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for a %T", within, *new(T))
		var zero T
		return zero
	}
}
