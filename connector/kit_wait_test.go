package connector_test

import (
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
)

// seen counts events by key — a message delivered, a channel reopened —
// and lets a test wait for one without polling: every add wakes the
// waiters, which then look at the counts again.
type seen struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{} // closed and replaced by every add
}

func newSeen() *seen { return &seen{n: map[string]int{}, changed: make(chan struct{})} }

func (s *seen) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[key]++
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *seen) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key]
}

// wait returns once key was seen n times, or fails t after 20 s: the
// bound only stops a hang, it measures nothing.
func (s *seen) wait(t *testing.T, key string, n int) {
	t.Helper()
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	for {
		s.mu.Lock()
		got, changed := s.n[key], s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-guard.C:
			t.Fatalf("%q seen %d times, waited for %d", key, got, n)
		}
	}
}

// delivered is an imv2.Options.OnDelivered that counts by message_id:
// the Connector's pending entry is removed before it is called.
func (s *seen) delivered(_ string, m imv2.ChatMessage, _ imv2.AckStatus) { s.add(m.MessageID) }
