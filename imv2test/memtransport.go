package imv2test

import (
	"context"
	"sync"

	"github.com/xagentkit/imv2"
)

// Receiver takes inbound packets; *imv2.Channel is one.
type Receiver interface {
	Receive(ctx context.Context, p *imv2.Packet) error
}

// MemTransport is one end of an in-memory connection, for tests and for
// running both roles in one process. Every packet is encoded and decoded
// on its way, as on a real wire, and delivered in order by one goroutine
// per end to the Receiver attached to the other end.
//
// Send never blocks: frames queue without bound, so two ends answering
// each other cannot deadlock. It is a test transport, not a production one.
type MemTransport struct {
	peer *MemTransport

	mu       sync.Mutex
	queue    [][]byte
	wake     chan struct{} // one token when queue became non-empty
	recv     Receiver
	closed   bool
	done     chan struct{}
	finished chan struct{}
}

// NewInMemoryTransports returns a connected pair. Attach a Receiver to each
// end; what one end Sends, the other end's Receiver gets. Close either end
// to stop both delivery goroutines.
func NewInMemoryTransports() (*MemTransport, *MemTransport) {
	a := newMemEnd()
	b := newMemEnd()
	a.peer, b.peer = b, a
	go a.run()
	go b.run()
	return a, b
}

func newMemEnd() *MemTransport {
	return &MemTransport{wake: make(chan struct{}, 1), done: make(chan struct{}), finished: make(chan struct{})}
}

// Attach sets the Receiver for packets sent by the other end.
func (t *MemTransport) Attach(r Receiver) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recv = r
}

// Send implements Transport: it encodes p and queues it for the peer.
func (t *MemTransport) Send(ctx context.Context, p *imv2.Packet) error {
	b, err := p.Encode()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.peer.enqueue(b)
}

func (t *MemTransport) enqueue(b []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return imv2.ErrClosed
	}
	t.queue = append(t.queue, b)
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}

// run delivers queued frames to this end's Receiver in order.
func (t *MemTransport) run() {
	defer close(t.finished)
	for {
		select {
		case <-t.done:
			return
		case <-t.wake:
		}
		for {
			t.mu.Lock()
			if t.closed || len(t.queue) == 0 {
				t.mu.Unlock()
				break
			}
			b := t.queue[0]
			t.queue[0] = nil
			t.queue = t.queue[1:]
			r := t.recv
			t.mu.Unlock()
			p, err := imv2.DecodePacket(b)
			if err == nil && r != nil {
				_ = r.Receive(context.Background(), p)
			}
		}
	}
}

// Close closes both ends and waits for their delivery goroutines.
func (t *MemTransport) Close() error {
	t.closeEnd()
	t.peer.closeEnd()
	<-t.finished
	<-t.peer.finished
	return nil
}

func (t *MemTransport) closeEnd() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.done)
	}
}
