package display

import "sync"

// callLock serializes the platform calls of one draft or typing state. It
// is held across a call, and a call may wait out a rate limit on the
// clock; so it is a channel, not a sync.Mutex: a goroutine waiting for it
// is durably blocked in a testing/synctest bubble, whose clock can then
// reach the end of that wait (a sync.Mutex wait stalls the bubble's clock
// for good). The zero value is unlocked.
type callLock struct {
	once sync.Once
	ch   chan struct{}
}

// Lock takes the lock, waiting while another call holds it.
func (l *callLock) Lock() {
	l.once.Do(func() { l.ch = make(chan struct{}, 1) })
	l.ch <- struct{}{}
}

// Unlock releases the lock; only its holder calls it.
func (l *callLock) Unlock() { <-l.ch }
