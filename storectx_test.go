package imv2

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestStoreContext_LikeWithTimeout: the lazy store context keeps the
// parent's values, has its deadline, ends with DeadlineExceeded once the
// deadline passed (whether or not Done was asked for first) and with
// Canceled when released, as context.WithTimeout does.
func TestStoreContext_LikeWithTimeout(t *testing.T) {
	parent := context.WithoutCancel(context.WithValue(context.Background(), ctxKey{}, "v"))

	c := newStoreContext(parent, time.Hour)
	if d, ok := c.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if c.Value(ctxKey{}) != "v" || c.Err() != nil {
		t.Fatalf("value %v, err %v", c.Value(ctxKey{}), c.Err())
	}
	done := c.Done()
	c.release()
	<-done
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("released: %v", c.Err())
	}

	// The timer armed by Done ends the context at the deadline.
	c = newStoreContext(parent, 10*time.Millisecond)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("after the deadline: %v", c.Err())
	}
	c.release()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("release changed the cause: %v", c.Err())
	}

	// Without Done, Err alone sees the deadline; a later Done is closed.
	c = newStoreContext(parent, -time.Second)
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("past deadline: %v", c.Err())
	}
	<-c.Done()
}
