package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// lockTable holds table in ACCESS EXCLUSIVE mode, as an operator's
// migration or a VACUUM FULL would, until the returned func is called.
func lockTable(t *testing.T, url, table string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if done {
			return
		}
		done = true
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}
	t.Cleanup(unlock)
	return unlock
}

// gatedAgent is xAgent's Target: it holds the user messages of one
// channel until release is closed.
type gatedAgent struct {
	*keyPlatform
	channel string
	release chan struct{}
	arrived chan struct{}
}

func (a *gatedAgent) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	if channelID == a.channel {
		select {
		case a.arrived <- struct{}{}:
		default:
		}
		<-a.release
	}
	return a.keyPlatform.PostMessage(ctx, channelID, m)
}

// lockHeld is how long the tests hold a table: long enough that every
// call on it waits past the 900 ms lease, short of the 20 s,
// which shows nothing more.
const lockHeld = 5 * time.Second

// TestFaults_S1_M12_TableLockHoldsOnlyTheChannelsThatNeedIt: one xAgent
// connection, two channels, a table locked for 5 s.
//   - imv2_pending: the Connector's Remove after xAgent acks channel 1's
//     user message waits for the lock; channel 2's finals, which need no
//     pending row, are all acknowledged while it is held.
//   - imv2_completed: channel 1's first delta (its Lookup) and final wait
//     for the lock; channel 2's user messages reach xAgent and their acks
//     are handled (removed from pending) while it is held.
//
// Either way, once the lock is released everything settles, each final
// posted once.
func TestFaults_S1_M12_TableLockHoldsOnlyTheChannelsThatNeedIt(t *testing.T) {
	t.Run("imv2_pending", func(t *testing.T) {
		url := srv.NewDatabase(t)
		ctx := context.Background()
		plat := newKeyPlatform(false)
		r := startReplica(t, url, plat, imv2.Options{TargetTimeout: faultTargetTimeout})
		rt := newRouter(t, r)
		agent := &gatedAgent{keyPlatform: newKeyPlatform(false), release: make(chan struct{}), arrived: make(chan struct{}, 1)}
		var cc cutConn
		var f failures
		x := dialThrough(t, rt, &cc, &f, agent)
		ch1, err := x.OpenChannel(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		ch2, err := x.OpenChannel(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		agent.channel = ch1
		if _, err := r.relay.Send(ctx, ch1, imv2.ChatMessage{MessageID: "u-1", Text: "hello"}); err != nil {
			t.Fatal(err)
		}
		<-agent.arrived
		unlock := lockTable(t, url, "imv2_pending")
		close(agent.release) // xAgent acks u-1: the Connector's Remove waits for the lock
		locked := time.Now()
		for i := range 10 {
			id := fmt.Sprintf("f-%d", i)
			if _, err := x.Send(ctx, ch2, imv2.ChatMessage{MessageID: id, Text: "reply"}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "channel 2's finals acknowledged", func() bool {
			p, _ := pendingOf(ctx, x, ch2)
			return len(p) == 0
		})
		acked := time.Since(locked)
		if acked >= lockHeld {
			t.Fatalf("channel 2's finals acknowledged %v after the lock, not while it was held (%v)", acked, lockHeld)
		}
		time.Sleep(lockHeld - time.Since(locked)) // the lock's length
		unlock()
		waitFor(t, "u-1 removed after the lock", func() bool { return pendingEmpty(t, r.st, ch1) })
		t.Logf("imv2_pending locked %v: channel 2's 10 finals acknowledged %v into it", lockHeld, acked.Round(time.Millisecond))
		for i := range 10 {
			if n := plat.count(fmt.Sprintf("f-%d", i)); n != 1 {
				t.Errorf("f-%d posted %d times, want 1", i, n)
			}
		}
	})
	t.Run("imv2_completed", func(t *testing.T) {
		url := srv.NewDatabase(t)
		ctx := context.Background()
		plat := newKeyPlatform(false)
		r := startReplica(t, url, plat, imv2.Options{TargetTimeout: faultTargetTimeout})
		rt := newRouter(t, r)
		agent := newKeyPlatform(false)
		var cc cutConn
		var f failures
		x := dialThrough(t, rt, &cc, &f, agent)
		ch1, err := x.OpenChannel(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		ch2, err := x.OpenChannel(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		unlock := lockTable(t, url, "imv2_completed")
		locked := time.Now()
		reply, err := x.NewReply(ch1, "s-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := reply.Delta(ctx, "thinking"); err != nil { // its Lookup waits for the lock
			t.Fatal(err)
		}
		if _, err := reply.Final(ctx, imv2.ChatMessage{Text: "thinking done"}); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := r.relay.Send(ctx, ch2, imv2.ChatMessage{MessageID: fmt.Sprintf("u-%d", i), Text: "hello"}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "channel 2's user messages acknowledged", func() bool { return pendingEmpty(t, r.st, ch2) })
		acked := time.Since(locked)
		if acked >= lockHeld {
			t.Fatalf("channel 2's user messages acknowledged %v after the lock, not while it was held (%v)", acked, lockHeld)
		}
		if plat.count("s-1") != 0 {
			t.Fatal("s-1 posted while imv2_completed was locked: the lock held nothing")
		}
		time.Sleep(lockHeld - time.Since(locked)) // the lock's length
		unlock()
		waitFor(t, "s-1 settled after the lock", func() bool {
			p, _ := pendingOf(ctx, x, ch1)
			return len(p) == 0
		})
		t.Logf("imv2_completed locked %v: channel 2's 10 user messages acknowledged %v into it", lockHeld, acked.Round(time.Millisecond))
		if n := plat.count("s-1"); n != 1 {
			t.Errorf("s-1 posted %d times, want 1", n)
		}
		for i := range 10 {
			if n := agent.count(fmt.Sprintf("u-%d", i)); n != 1 {
				t.Errorf("u-%d reached xAgent %d times, want 1", i, n)
			}
		}
	})
}
