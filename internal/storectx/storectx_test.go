package storectx

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/fakeclock"
)

type ctxKey struct{}

// keyName is the context key of testKey's value.
type keyName struct{}

// testKey stands for a message's idempotency key.
var testKey = Key{Name: keyName{}, Of: func(a, b string) string { return a + "/" + b }, A: "cch_1", B: "msg_1"}

// TestStoreContext_LikeWithTimeout: the lazy store context keeps the
// parent's values, has its deadline, ends with DeadlineExceeded once the
// deadline passed (whether or not Done was asked for first) and with
// Canceled when released, as context.WithTimeout does.
func TestStoreContext_LikeWithTimeout(t *testing.T) {
	parent := context.WithoutCancel(context.WithValue(context.Background(), ctxKey{}, "v"))

	c := New(clock.System{}, parent, time.Hour)
	if d, ok := c.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if c.Value(ctxKey{}) != "v" || c.Err() != nil {
		t.Fatalf("value %v, err %v", c.Value(ctxKey{}), c.Err())
	}
	done := c.Done()
	c.Release()
	<-done
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("released: %v", c.Err())
	}

	// The timer armed by Done ends the context at the deadline.
	c = New(clock.System{}, parent, 10*time.Millisecond)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("after the deadline: %v", c.Err())
	}
	c.Release()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("release changed the cause: %v", c.Err())
	}

	// Without Done, Err alone sees the deadline; a later Done is closed.
	c = New(clock.System{}, parent, -time.Second)
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("past deadline: %v", c.Err())
	}
	<-c.Done()
}

// TestTargetContext_LikeWithTimeoutAndKey: the Target's lazy context is
// context.WithTimeout(WithValue(parent, k.Name, k.Of(k.A, k.B)), d): it
// carries the key's value, ends when the parent is cancelled (Close), whether Done
// was asked for before or after, and keeps the earlier deadline.
func TestTargetContext_LikeWithTimeoutAndKey(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	c := NewTarget(clock.System{}, parent, time.Hour, testKey)
	if k := c.Value(keyName{}); k != "cch_1/msg_1" {
		t.Fatalf("key %v", k)
	}
	if c.Value(ctxKey{}) != "v" || c.Err() != nil {
		t.Fatalf("value %v, err %v", c.Value(ctxKey{}), c.Err())
	}
	done := c.Done()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed when the parent was cancelled")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("after the parent's cancel: %v", c.Err())
	}
	c.Release()

	// Cancelled before Done is asked for: Err and Done see it at once.
	c = NewTarget(clock.System{}, parent, time.Hour, testKey)
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("cancelled parent: %v", c.Err())
	}
	<-c.Done()

	// The parent's earlier deadline wins.
	short, cancelShort := context.WithTimeout(context.Background(), time.Minute)
	defer cancelShort()
	c = NewTarget(clock.System{}, short, time.Hour, testKey)
	if d, _ := c.Deadline(); time.Until(d) > 2*time.Minute {
		t.Fatalf("deadline %v: not the parent's", d)
	}
	c.Release()

	// A store context carries no key.
	if k := New(clock.System{}, context.Background(), time.Hour).Value(keyName{}); k != nil {
		t.Fatalf("a store context carries key %v", k)
	}
}

// TestStoreContext_S8_OutlivesItsParent: a store call's context is not
// ended by the channel's cancellation (Close): the completed record of a
// message already posted must still be written.
func TestStoreContext_S8_OutlivesItsParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	cancel()
	c := New(clock.System{}, parent, time.Hour)
	if c.Err() != nil || c.Value(ctxKey{}) != "v" {
		t.Fatalf("err %v value %v", c.Err(), c.Value(ctxKey{}))
	}
	select {
	case <-c.Done():
		t.Fatal("a store context ended with its parent")
	default:
	}
	c.Release()
}

// TestContext_AfterFuncWatchesWithoutAGoroutine: context.AfterFunc on a
// Context (a store watching its calls' contexts, as pgstore's group
// commit does, or context.WithCancel of one) calls f once the Context
// ends (released, past its deadline on its clock, its parent cancelled,
// or ended before), not once stopped, and holds no goroutine while it
// waits (context.AfterFunc's fallback is one goroutine per watch).
func TestContext_AfterFuncWatchesWithoutAGoroutine(t *testing.T) {
	clk := fakeclock.New(time.Unix(1_000_000_000, 0))
	const n = 200
	before := runtime.NumGoroutine()
	ran := make(chan struct{}, n)
	cs := make([]*Context, n)
	for i := range cs {
		cs[i] = New(clk, context.Background(), time.Hour)
		context.AfterFunc(cs[i], func() { ran <- struct{}{} })
	}
	if grew := runtime.NumGoroutine() - before; grew >= n/2 {
		t.Fatalf("%d watches hold %d goroutines", n, grew)
	}
	for _, c := range cs {
		c.Release()
	}
	for range n {
		<-ran
	}

	// Its deadline, on its clock, ends a context derived from it.
	c := New(clk, context.Background(), time.Second)
	child, cancel := context.WithCancel(c)
	defer cancel()
	clk.Advance(2 * time.Second)
	<-child.Done()
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("derived context after the deadline: %v", child.Err())
	}

	// A Target context ends with its parent, and so does the watch.
	parent, cancelParent := context.WithCancel(context.Background())
	c = NewTarget(clk, parent, time.Hour, Key{})
	context.AfterFunc(c, func() { ran <- struct{}{} })
	cancelParent()
	<-ran

	// Stopped, f is not called.
	c = New(clk, context.Background(), time.Hour)
	stop := context.AfterFunc(c, func() { ran <- struct{}{} })
	if !stop() || c.after != nil {
		t.Fatal("stop left its function")
	}
	c.Release()
	if stop() {
		t.Fatal("a second stop stopped f again")
	}

	// On a context that has ended, f is called at once.
	context.AfterFunc(c, func() { ran <- struct{}{} })
	<-ran
	select {
	case <-ran:
		t.Fatal("a stopped f was called")
	default:
	}
}

// As context's contract says: once Err is not nil, Done is closed, for a
// reader racing the end of the context too.
func TestContext_ErrOnlyOnceDoneIsClosed(t *testing.T) {
	for range 2000 {
		c := New(clock.System{}, context.Background(), time.Hour)
		done := c.Done()
		read := make(chan error, 1)
		go func() {
			for {
				if err := c.Err(); err != nil {
					select {
					case <-done:
						read <- nil
					default:
						read <- errors.New("Err is " + err.Error() + " while Done is open")
					}
					return
				}
				runtime.Gosched()
			}
		}()
		c.Release()
		if err := <-read; err != nil {
			t.Fatal(err)
		}
	}
}
