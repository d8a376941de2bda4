package imv2test

import (
	"context"
	"errors"
	"net"
	"sync"
)

// pipeNet is an in-memory network of one listening address: Dial hands
// the listener the far end of a net.Pipe. Everything on it blocks on
// channels, never on a socket, so inside a testing/synctest bubble a
// goroutine waiting on it is durably blocked and the bubble's clock can
// advance: the suite's waits and the Connector's timers then cost no
// wall time.
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (n *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener; later dials fail.
func (n *pipeNet) Close() error {
	n.once.Do(func() { close(n.done) })
	return nil
}

// Addr implements net.Listener.
func (n *pipeNet) Addr() net.Addr { return pipeAddr{} }

// dial connects to the listener, whatever the address.
func (n *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case n.conns <- server:
		return client, nil
	case <-n.done:
		client.Close()
		server.Close()
		return nil, errors.New("imv2test: the in-memory listener is closed")
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

// url is the base URL a run uses for the listener.
func (n *pipeNet) url() string { return "http://" + n.Addr().String() }

// pipeAddr is the listener's address; URLs name it as host "kit.test".
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "kit.test:80" }
