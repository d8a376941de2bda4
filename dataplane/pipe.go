package dataplane

import (
	"context"
	"sync"

	"github.com/xagentkit/imv2"
)

// NewPipe returns two connected in-memory Conns for tests: a packet written
// to one is read from the other. Packets are encoded and decoded on the
// way, as on a socket, so neither side can alias the other's memory and
// envelope checks apply. Closing either end closes both. It starts no
// goroutine.
func NewPipe() (Conn, Conn) {
	shared := &pipeShared{done: make(chan struct{})}
	ab := make(chan []byte, 64)
	ba := make(chan []byte, 64)
	return &pipeConn{s: shared, in: ba, out: ab}, &pipeConn{s: shared, in: ab, out: ba}
}

type pipeShared struct {
	once sync.Once
	done chan struct{}
}

type pipeConn struct {
	s   *pipeShared
	in  <-chan []byte
	out chan<- []byte
}

// Read implements Conn.
func (c *pipeConn) Read(ctx context.Context) (*imv2.Packet, error) {
	select {
	case data := <-c.in:
		return imv2.DecodePacket(data)
	case <-c.s.done:
		return nil, closedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write implements Conn.
func (c *pipeConn) Write(ctx context.Context, p *imv2.Packet) error {
	data, err := p.Encode()
	if err != nil {
		return err
	}
	select {
	case <-c.s.done:
		return closedErr()
	default:
	}
	select {
	case c.out <- data:
		return nil
	case <-c.s.done:
		return closedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements Conn; it closes both ends.
func (c *pipeConn) Close() error {
	c.s.once.Do(func() { close(c.s.done) })
	return nil
}
