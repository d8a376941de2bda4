// Package clock holds the time source every timer of the SDK reads, so
// tests can replace it (see package fakeclock) and never sleep. Package
// imv2 re-exports these names; import this package only to implement a
// Clock without importing imv2.
package clock

import "time"

// Clock is the time source of every timer in the SDK: ack timeouts,
// backoff, TTL sweeps and activity timeouts.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the handle AfterFunc returns.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// System is the Clock of package time.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
