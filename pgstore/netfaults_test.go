package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
)

// flow is xAgent on one channel through a router in front of two
// replicas, a platform that counts every post, and xAgent's count of the
// user messages it got.
type flow struct {
	plat, agent *keyPlatform
	reps        [2]*replica
	rt          *router
	cc          cutConn
	failed      failures
	x           *dataplane.Client
	ch          string

	mu       sync.Mutex
	finals   []string
	accepted []string // user messages a Relay accepted
	refused  int      // user messages a Relay refused (not accepted: the sender retries them)
}

func newFlow(t *testing.T, url string) *flow {
	t.Helper()
	f := &flow{plat: newKeyPlatform(false), agent: newKeyPlatform(false)}
	opts := imv2.Options{TargetTimeout: faultTargetTimeout}
	f.reps = [2]*replica{startReplica(t, url, f.plat, opts), startReplica(t, url, f.plat, opts)}
	f.rt = newRouter(t, f.reps[0])
	x := dialThrough(t, f.rt, &f.cc, &f.failed, f.agent)
	ch, err := x.OpenChannel(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	f.x, f.ch = x, ch
	return f
}

// send sends final and user message i (the user message through replica
// i%2's Relay, as users reach either replica).
func (f *flow) send(t *testing.T, prefix string, i int) {
	ctx := context.Background()
	id := fmt.Sprintf("%s-f-%d", prefix, i)
	if _, err := f.x.Send(ctx, f.ch, imv2.ChatMessage{MessageID: id, Text: "reply"}); err != nil {
		t.Errorf("final %s not queued: %v", id, err)
		return
	}
	u := fmt.Sprintf("%s-u-%d", prefix, i)
	_, err := f.reps[i%2].relay.Send(ctx, f.ch, imv2.ChatMessage{MessageID: u, Text: "hello"})
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finals = append(f.finals, id)
	if err != nil {
		f.refused++
		return
	}
	f.accepted = append(f.accepted, u)
}

// move sends xAgent's connection to the other replica.
func (f *flow) move() {
	if f.rt.to.Load() == f.reps[0] {
		f.rt.to.Store(f.reps[1])
	} else {
		f.rt.to.Store(f.reps[0])
	}
	f.cc.cut()
}

// settled: no final pending at xAgent and every accepted user message
// arrived.
func (f *flow) settled() bool {
	if p, _ := pendingOf(context.Background(), f.x, f.ch); len(p) != 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.accepted {
		if f.agent.count(u) == 0 {
			return false
		}
	}
	return true
}

// check: every final posted once, or, if its outcome became unknown,
// posted at most once and reported to the sender; every accepted user
// message reached xAgent once.
func (f *flow) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	told := map[string]bool{}
	for _, s := range f.failed.list() {
		id, code, _ := strings.Cut(s, ": ")
		if code != string(imv2.CodeDeliveryOutcomeUnknown) {
			t.Errorf("final %s failed with %s", id, code)
		}
		told[id] = true
	}
	for _, id := range f.finals {
		n := f.plat.count(id)
		switch {
		case n > 1:
			t.Errorf("final %s posted %d times", id, n)
		case n == 0 && !told[id]:
			t.Errorf("final %s never posted and the sender not told", id)
		}
	}
	for _, u := range f.accepted {
		if n := f.agent.count(u); n != 1 {
			t.Errorf("accepted user message %s reached xAgent %d times, want 1", u, n)
		}
	}
	t.Logf("%d finals (%d outcomes unknown, reported), %d user messages accepted, %d refused", len(f.finals), len(told), len(f.accepted), f.refused)
}

// TestFaults_S1_S8_DatabaseLatency: 50 ms each way between the replicas
// and PostgreSQL (every store call at least 100 ms), 40 finals and 40
// user messages with a move in the middle: nothing lost, nothing posted
// twice, and it settles.
func TestFaults_S1_S8_DatabaseLatency(t *testing.T) {
	px, url := newPGProxy(t, srv.NewDatabase(t))
	f := newFlow(t, url)
	px.set(50*time.Millisecond, false)
	begin := time.Now()
	const n = 40
	for i := range n {
		f.send(t, "l", i)
		if i == n/2 {
			f.move()
		}
	}
	sent := time.Since(begin)
	waitFor(t, "settled under latency", f.settled)
	t.Logf("50 ms each way: %d finals and %d user messages sent in %v, settled %v after the first",
		n, n, sent.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	f.check(t)
}

// TestFaults_S1_S8_DatabaseBlackhole: the network to PostgreSQL forwards
// nothing for 2 s (past the 900 ms lease) while finals and user messages
// flow and xAgent moves: nothing accepted is lost, no final is posted
// twice, an unknown outcome is reported, and it settles after.
func TestFaults_S1_S8_DatabaseBlackhole(t *testing.T) {
	px, url := newPGProxy(t, srv.NewDatabase(t))
	f := newFlow(t, url)
	const n = 40
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			f.send(t, "b", i)
			if i == n/2 {
				f.move()
			}
			time.Sleep(20 * time.Millisecond) // pacing the traffic, as users would
		}
	}()
	time.Sleep(200 * time.Millisecond) // traffic flows before the fault
	px.set(0, true)
	time.Sleep(2 * time.Second) // the blackhole's length
	px.set(0, false)
	back := time.Now()
	wg.Wait()
	waitFor(t, "settled after the blackhole", f.settled)
	t.Logf("2 s blackhole: settled %v after it ended", time.Since(back).Round(time.Millisecond))
	f.check(t)
}
