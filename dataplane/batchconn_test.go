package dataplane

import (
	"net"
	"testing"
	"time"
)

// deadlineConn counts the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (d *deadlineConn) SetWriteDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

func (d *deadlineConn) SetDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// TestBatchConn_RepeatedWriteDeadlineNotPassedDown: gorilla/websocket sets
// the write deadline before every frame, the same one within a batch;
// only a new deadline reaches the socket (each is a timer update), and a
// SetDeadline or a zero deadline (none) always does.
func TestBatchConn_RepeatedWriteDeadlineNotPassedDown(t *testing.T) {
	d := &deadlineConn{}
	b := &batchConn{Conn: d}
	t1 := time.Unix(1000, 0)
	t2 := t1.Add(time.Second)
	for _, tt := range []time.Time{t1, t1, t1, t2, t2, {}, {}, t2} {
		if err := b.SetWriteDeadline(tt); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetDeadline(t1); err != nil {
		t.Fatal(err)
	}
	if err := b.SetWriteDeadline(t1); err != nil {
		t.Fatal(err)
	}
	want := []time.Time{t1, t2, {}, {}, t2, t1}
	if len(d.set) != len(want) {
		t.Fatalf("deadlines passed down %v, want %v", d.set, want)
	}
	for i := range want {
		if !d.set[i].Equal(want[i]) {
			t.Fatalf("deadlines passed down %v, want %v", d.set, want)
		}
	}
}
