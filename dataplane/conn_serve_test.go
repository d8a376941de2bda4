package dataplane

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

// TestConn_Serve_OneAtATimeInOrderNeverAfterReturn: wsConn.serve runs the
// handler on the reader goroutine for every frame, in the order sent, one
// call at a time (a slow call holds the reading: backpressure, no
// buffer); once serve has returned the handler is never called again,
// though the connection still reads.
func TestConn_Serve_OneAtATimeInOrderNeverAfterReturn(t *testing.T) {
	c, peer := keepalivePair(t, fakeclock.New(t0), true, nil)
	pongs := make(chan struct{}, 1)
	peer.SetPongHandler(func(string) error { pongs <- struct{}{}; return nil })
	peerEnded := readLoop(peer)

	const n = 20
	var (
		mu      sync.Mutex
		got     []string
		running int
		most    int
		late    int // calls after serve returned
		over    bool
	)
	first, release, all := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		err := c.serve(ctx, func(p *imv2.Packet, err error) {
			if err != nil {
				t.Errorf("frame %v: %v", p, err)
				return
			}
			mu.Lock()
			if over {
				late++
			}
			running++
			most = max(most, running)
			got = append(got, p.PacketID)
			k := len(got)
			mu.Unlock()
			if k == 1 {
				close(first)
				<-release // a slow call: the frames behind it wait in the socket
			}
			mu.Lock()
			running--
			mu.Unlock()
			if k == n {
				close(all)
			}
		})
		mu.Lock()
		over = true
		mu.Unlock()
		served <- err
	}()

	frame := func() string {
		p, err := imv2.NewPacket(protocol.TypePing, "", nil)
		require.NoError(t, err)
		data, err := p.Encode()
		require.NoError(t, err)
		require.NoError(t, peer.WriteMessage(websocket.TextMessage, data))
		return p.PacketID
	}
	var sent []string
	for range n {
		sent = append(sent, frame())
	}
	recv(t, first)
	close(release)
	recv(t, all)
	mu.Lock()
	require.Equal(t, sent, got, "every frame, in order")
	require.Equal(t, 1, most, "one call at a time")
	mu.Unlock()

	cancel()
	require.ErrorIs(t, recv(t, served), context.Canceled)
	// Frames after serve returned: the reader reads them (a ping behind
	// them is answered, so they were read) and hands them to nobody.
	for range 3 {
		frame()
	}
	require.NoError(t, peer.WriteControl(websocket.PingMessage, nil, time.Now().Add(wait)))
	recv(t, pongs)
	mu.Lock()
	require.Zero(t, late, "no call after serve returned")
	require.Len(t, got, n)
	mu.Unlock()

	require.NoError(t, c.Close())
	<-peerEnded
}

// servePing sends one frame (a ping packet) from the bare peer.
func servePing(t *testing.T, peer *websocket.Conn) {
	t.Helper()
	p, err := imv2.NewPacket(protocol.TypePing, "", nil)
	require.NoError(t, err)
	data, err := p.Encode()
	require.NoError(t, err)
	require.NoError(t, peer.WriteMessage(websocket.TextMessage, data))
}

// TestConn_Serve_CloseFromTheHandlerReturns: the handler serve runs on
// the reader goroutine may close its own connection (a handler on a Read
// loop could): Close does not wait for the reader it is running on, nor
// for the peer's close frame that reader cannot read meanwhile, and
// serve returns once the handler did, with the reader gone. CloseTimeout
// is an hour, so Close cannot pass by giving up on the peer.
func TestConn_Serve_CloseFromTheHandlerReturns(t *testing.T) {
	c, peer := connPair(t, ConnConfig{Clock: fakeclock.New(t0), PingInterval: -1, CloseTimeout: time.Hour}, true)
	peerEnded := readLoop(peer)
	closed := make(chan error, 1)
	served := make(chan error, 1)
	go func() {
		served <- c.serve(context.Background(), func(*imv2.Packet, error) {
			select {
			case closed <- c.Close():
			default: // a later frame: closed once already
			}
		})
	}()
	servePing(t, peer)
	require.NoError(t, recv(t, closed))
	require.Error(t, recv(t, served))
	recv(t, c.readerDone) // serve's caller has seen the reader end
	<-peerEnded
}

// TestConn_Serve_CloseWhileTheHandlerBlocksReturns: Close from another
// goroutine returns while a handler call is blocked (it waits for no
// user code); serve returns only after that call returned and the reader
// ended, and the handler is never called again.
func TestConn_Serve_CloseWhileTheHandlerBlocksReturns(t *testing.T) {
	c, peer := connPair(t, ConnConfig{Clock: fakeclock.New(t0), PingInterval: -1, CloseTimeout: time.Hour}, true)
	peerEnded := readLoop(peer)
	var calls atomic.Int32
	var returned atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	served := make(chan error, 1)
	go func() {
		err := c.serve(context.Background(), func(*imv2.Packet, error) {
			if calls.Add(1) == 1 {
				close(entered)
				<-release
				returned.Store(true)
			}
		})
		require.True(t, returned.Load(), "serve returned before its handler call did")
		served <- err
	}()
	servePing(t, peer)
	recv(t, entered)
	servePing(t, peer) // behind the blocked call: never handled
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	require.NoError(t, recv(t, closed))
	select {
	case err := <-served:
		t.Fatalf("serve returned (%v) while its handler call was still running", err)
	default:
	}
	close(release)
	require.Equal(t, imv2.CodeClosed, imv2.AsError(recv(t, served), "").Code)
	recv(t, c.readerDone)
	require.Equal(t, int32(1), calls.Load(), "no call after Close")
	<-peerEnded
}
