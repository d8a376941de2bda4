package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/state"
)

// faultTargetTimeout is the replicas' TargetTimeout in the fault tests:
// their claim lease is the default 3×, 900 ms.
const faultTargetTimeout = 300 * time.Millisecond

// recordGate is the Completed store of a replica whose Records wait for
// the test (until hold is closed) before they reach the database: a
// Record delayed, by a slow network or a wait for a pooled connection,
// past the claim lease. Every other call, RenewClaim too, goes through.
type recordGate struct {
	*pgstore.Store
	hold chan struct{}
	held chan string // the message ID of each Record held
}

func newRecordGate() *recordGate {
	return &recordGate{hold: make(chan struct{}), held: make(chan string, 64)}
}

func (g *recordGate) Record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint) error {
	g.held <- messageID
	select {
	case <-g.hold:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.Record(ctx, channelID, messageID, fp)
}

// gated is a startReplica option: the replica's Completed store is g in
// front of its own Store.
func gated(g *recordGate) func(*dataplane.ServerConfig) {
	return func(cfg *dataplane.ServerConfig) {
		g.Store = cfg.Options.Completed.(*pgstore.Store)
		cfg.Options.Completed = g
	}
}

// failures collects what a sender was told of messages that ended
// without delivery (Options.OnFailed): an unknown outcome is reported,
// never hidden.
type failures struct {
	mu  sync.Mutex
	got []string
}

func (f *failures) add(_ string, m imv2.ChatMessage, e *imv2.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, m.MessageID+": "+string(e.Code))
}

func (f *failures) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// dialThrough dials xAgent through rt, its connection in cc, reporting
// failures to f.
func dialThrough(t *testing.T, rt *router, cc *cutConn, f *failures, agent imv2.Target) *dataplane.Client {
	t.Helper()
	pend := newXPending()
	x, err := dataplane.Dial(context.Background(), dataplane.ClientConfig{
		URL: rt.hs.URL, Target: agent, Store: state.NewMemoryChannelStore(0),
		Options: &imv2.Options{
			Pending:    pend,
			AckTimeout: 500 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
			OnFailed: f.add,
		},
		Advanced: dataplane.ClientAdvanced{CardID: consolebridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond, WrapConn: cc.wrap},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	trackPending(t, x, pend)
	return x
}

// moveDuringRecord sends final f-1 to replica a, holds a's Record of it
// for hold (past the lease), and meanwhile moves xAgent's connection to
// replica b, which gets the resend while a still delivers. It returns
// once the final settled (no longer pending at xAgent), with what the
// sender was told.
func moveDuringRecord(t *testing.T, a, b *replica, g *recordGate, hold time.Duration) []string {
	t.Helper()
	ctx := context.Background()
	rt := newRouter(t, a)
	var cc cutConn
	var f failures
	x := dialThrough(t, rt, &cc, &f, newKeyPlatform(false))
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Send(ctx, ch, imv2.ChatMessage{MessageID: "f-1", Text: "reply"}); err != nil {
		t.Fatal(err)
	}
	<-g.held // a posted f-1; its Record waits
	rt.to.Store(b)
	cc.cut() // xAgent reconnects to b and resends f-1 there
	// The fault's length, in real time: the database's clock times the
	// leases, and no fake clock moves it.
	time.Sleep(hold)
	close(g.hold)
	waitFor(t, "f-1 settled at xAgent", func() bool {
		p, _ := pendingOf(ctx, x, ch)
		return len(p) == 0 && b.srv.IsOpen(ch)
	})
	return f.list()
}

// TestFaults_S8_A6_SlowRecordWithAMoveKeepsTheClaim: replica a posts a
// final and its Record is delayed three leases; xAgent moves to replica
// b meanwhile and resends the final there. a renews its claim while the
// Record waits, so b answers busy until a's Record lands, then
// duplicate: a deduplicating platform gets the final posted once (not
// once by each replica), a plain one gets it once and the sender is told
// of no unknown outcome.
func TestFaults_S8_A6_SlowRecordWithAMoveKeepsTheClaim(t *testing.T) {
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idem), func(t *testing.T) {
			url := srv.NewDatabase(t)
			plat := newKeyPlatform(idem)
			opts := imv2.Options{TargetTimeout: faultTargetTimeout}
			g := newRecordGate()
			a := startReplica(t, url, plat, opts, gated(g))
			b := startReplica(t, url, plat, opts)
			lease := 3 * faultTargetTimeout
			begin := time.Now()
			failed := moveDuringRecord(t, a, b, g, 3*lease)
			t.Logf("settled %v after the send (Record held %v, lease %v)", time.Since(begin).Round(time.Millisecond), 3*lease, lease)
			if n := plat.count("f-1"); n != 1 {
				t.Errorf("f-1 posted %d times, want 1: a live holder lost its claim", n)
			}
			if len(failed) != 0 {
				t.Errorf("sender told %v, want nothing: the holder was alive, the outcome known", failed)
			}
		})
	}
}

// TestFaults_S8_A6_RecordSlowerThanTheStoreTimeoutKeepsTheClaim (issue
// 38): as above, with a's Record held 15 s, past the 10 s bound of a
// store call. a retries its Record and renews its claim for as long as
// the store takes, so b answers busy until a's Record lands: 0 posted
// twice, and the sender is told of no unknown outcome.
func TestFaults_S8_A6_RecordSlowerThanTheStoreTimeoutKeepsTheClaim(t *testing.T) {
	const hold = 15 * time.Second
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idem), func(t *testing.T) {
			t.Parallel()
			url := srv.NewDatabase(t)
			plat := newKeyPlatform(idem)
			opts := imv2.Options{TargetTimeout: faultTargetTimeout}
			g := newRecordGate()
			a := startReplica(t, url, plat, opts, gated(g))
			b := startReplica(t, url, plat, opts)
			failed := moveDuringRecord(t, a, b, g, hold)
			if n := plat.count("f-1"); n != 1 {
				t.Errorf("f-1 posted %d times, want 1: a live holder lost its claim to a slow Record", n)
			}
			if len(failed) != 0 {
				t.Errorf("sender told %v, want nothing: the holder was alive, the outcome known", failed)
			}
		})
	}
}

// aheadClock is the system clock shifted by d: a replica whose clock
// runs ahead.
type aheadClock struct{ d time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.d) }

func (c aheadClock) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(d, f) }

// TestFaults_S8_A6_ClockSkewBeyondTheLease: replica b's clock runs 20 s
// ahead, far beyond the 900 ms lease, and gets the resend of a final
// replica a is still delivering (its Record held 600 ms).
//   - Leases timed by the database (pgstore's default): b's clock times
//     only its Channel's timers and its records' TTL, and b finds a's
//     claim held: the final is posted once and nobody is told an unknown
//     outcome.
//   - Leases timed by b's own clock (pgstore.Options.Clock set, as
//     before leases moved to the database): what pgstore/doc.go says of a
//     replica ahead by more than the lease happens: b takes a's live
//     claim over at once, and a deduplicating platform gets the final
//     posted twice (shown once, by its key), a plain one gets it once and
//     the sender is told delivery_outcome_unknown.
func TestFaults_S8_A6_ClockSkewBeyondTheLease(t *testing.T) {
	const skew = 20 * time.Second
	for _, tc := range []struct {
		name        string
		replicaTime bool // b's leases by its own clock
		idem        bool
		posts       int
		told        []string
	}{
		{name: "database time/idempotent", idem: true, posts: 1},
		{name: "database time/plain", posts: 1},
		{name: "replica time/idempotent", replicaTime: true, idem: true, posts: 2},
		{name: "replica time/plain", replicaTime: true, posts: 1, told: []string{"f-1: " + string(imv2.CodeDeliveryOutcomeUnknown)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := srv.NewDatabase(t)
			plat := newKeyPlatform(tc.idem)
			g := newRecordGate()
			a := startReplica(t, url, plat, imv2.Options{TargetTimeout: faultTargetTimeout}, gated(g))
			ahead := aheadClock{skew}
			b := startReplica(t, url, plat, imv2.Options{TargetTimeout: faultTargetTimeout, Clock: ahead}, func(cfg *dataplane.ServerConfig) {
				if tc.replicaTime {
					cfg.Options.Completed = openStore(t, url, pgstore.Options{Clock: ahead})
				}
			})
			failed := moveDuringRecord(t, a, b, g, 2*faultTargetTimeout)
			if n := plat.count("f-1"); n != tc.posts {
				t.Errorf("f-1 posted %d times, want %d", n, tc.posts)
			}
			if !slices.Equal(failed, tc.told) {
				t.Errorf("sender told %v, want %v", failed, tc.told)
			}
			plat.mu.Lock()
			shown := len(plat.order)
			plat.mu.Unlock()
			if tc.idem && shown != 1 {
				t.Errorf("the deduplicating platform shows %d, want 1", shown)
			}
		})
	}
}
