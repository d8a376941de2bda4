package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
)

// Conn is one data-plane connection carrying whole packets, in the spirit
// of the MCP Go SDK's Connection: the sessions of this package speak only
// to it, so a test can swap the WebSocket for NewPipe and a logger can wrap
// it (NewLoggingConn).
//
// Read returns the next packet. A frame that is not a valid packet (not
// JSON, an invalid envelope, a binary frame) yields an *imv2.Error with
// code invalid_packet, and the packet as far as it decoded (possibly nil);
// the Conn stays usable and the caller answers with an error packet (E2).
// Every other error is final: the connection is gone.
//
// Write sends one packet as one text frame. It is safe for concurrent use;
// writes leave in the order they were accepted. Close is graceful and
// idempotent; Read and Write return an error with code closed afterwards.
type Conn interface {
	Read(ctx context.Context) (*imv2.Packet, error)
	Write(ctx context.Context, p *imv2.Packet) error
	Close() error
}

// Defaults of ConnConfig.
const (
	// DefaultReadLimit bounds one inbound frame (W2). A larger frame closes
	// the connection with close code 1009 (message too big).
	DefaultReadLimit = 1 << 20
	// DefaultWriteTimeout bounds the write of one frame.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultPingInterval is how often a WebSocket ping control frame goes out.
	DefaultPingInterval = 30 * time.Second
	// DefaultPongTimeout is how long after a ping the peer has to show any
	// sign of life (a pong or any frame) before the connection is dropped.
	DefaultPongTimeout = 15 * time.Second
	// DefaultCloseTimeout bounds the wait for the peer's close frame in a
	// graceful close.
	DefaultCloseTimeout = 2 * time.Second
)

// ConnConfig tunes a WebSocket Conn. Zero fields take the defaults above.
type ConnConfig struct {
	// ReadLimit bounds one inbound frame in bytes (W2). Outbound packets
	// above it are refused too, so this side never sends what it would
	// not accept.
	ReadLimit int64
	// WriteTimeout bounds each frame write (a context deadline, if
	// earlier, wins).
	WriteTimeout time.Duration
	// PingInterval is the keepalive period; negative disables pings.
	PingInterval time.Duration
	// PongTimeout is how long a ping may go unanswered.
	PongTimeout time.Duration
	// CloseTimeout bounds the graceful close handshake.
	CloseTimeout time.Duration
	// Clock drives the keepalive timers; default clock.System{}.
	// Network deadlines always use real time.
	Clock clock.Clock

	onPong func() // test hook: a pong arrived
}

func (c ConnConfig) withDefaults() ConnConfig {
	if c.ReadLimit <= 0 {
		c.ReadLimit = DefaultReadLimit
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.PongTimeout <= 0 {
		c.PongTimeout = DefaultPongTimeout
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	return c
}

// errPongTimeout ends a connection whose peer stopped answering pings.
var errPongTimeout = errors.New("dataplane: no pong within the pong timeout")

// CloseCode returns the WebSocket close code the peer sent, if err (from
// Conn.Read or Conn.Write) carries one: 1000 for a normal close, 1009 when
// a frame was over the peer's read limit (W2).
func CloseCode(err error) (int, bool) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code, true
	}
	return 0, false
}

// wsConn is the Conn over gorilla/websocket. Data frames are written by
// the callers of Write themselves, one at a time under wlock, so a packet
// costs no hand-off to another goroutine; the writer goroutine sends the
// control frames (ping, close), which gorilla allows concurrently with a
// data write. One goroutine reads (the reader).
type wsConn struct {
	ws  *websocket.Conn
	cfg ConnConfig

	in      chan readItem // reader → Read
	wlock   chan struct{} // capacity 1: held while a data frame is written
	wbuf    []byte        // encode buffer, guarded by wlock
	pings   chan struct{} // keepalive tick → writer, capacity 1
	closing chan struct{} // closed when Close starts: no new writes
	done    chan struct{} // closed at shutdown: everything stops

	readerDone chan struct{}
	wg         sync.WaitGroup

	alive atomic.Uint64 // frames and pongs received: proof of life

	closeOnce sync.Once
	downOnce  sync.Once
	mu        sync.Mutex
	err       error       // why the connection ended
	pingTimer clock.Timer // guarded by mu
	pongTimer clock.Timer // guarded by mu
	stopped   bool        // guarded by mu: no more timers
}

type readItem struct {
	p   *imv2.Packet
	err error
}

// newWSConn wraps an established WebSocket and starts its reader and
// writer goroutines; Close stops both.
func newWSConn(ws *websocket.Conn, cfg ConnConfig) *wsConn {
	cfg = cfg.withDefaults()
	c := &wsConn{
		ws:         ws,
		cfg:        cfg,
		in:         make(chan readItem),
		wlock:      make(chan struct{}, 1),
		pings:      make(chan struct{}, 1),
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	ws.SetReadLimit(cfg.ReadLimit)
	ws.SetPongHandler(func(string) error {
		c.alive.Add(1)
		if cfg.onPong != nil {
			cfg.onPong()
		}
		return nil
	})
	c.wg.Add(2)
	go c.reader()
	go c.writer()
	c.schedulePing()
	return c
}

func (c *wsConn) reader() {
	defer c.wg.Done()
	defer close(c.readerDone)
	// One buffer for every frame: DecodePacket copies what it keeps. A
	// buffer grown by a large frame is dropped, not kept for the
	// connection's life.
	var buf bytes.Buffer
	for {
		mt, r, err := c.ws.NextReader()
		if err == nil {
			if buf.Cap() > maxKeptBuffer {
				buf = bytes.Buffer{}
			}
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			c.readFailed(err)
			return
		}
		data := buf.Bytes()
		c.alive.Add(1)
		var it readItem
		if mt != websocket.TextMessage {
			// W2: binary frames are not packets. Answer like any other
			// invalid frame (E2) rather than dropping the connection: a
			// peer bug should cost one error packet, not every channel.
			it.err = imv2.Errorf(imv2.CodeInvalidPacket, "binary frame: the data plane takes text frames only (W2)")
		} else {
			it.p, it.err = imv2.DecodePacket(data)
		}
		select {
		case c.in <- it:
		case <-c.closing:
			// Closing: keep reading only to see the peer's close frame.
		case <-c.done:
			return
		}
	}
}

// readFailed ends the connection after a read error. After a frame over
// the read limit gorilla has already sent close 1009; the rest of the
// oversized frame is drained so the peer reads that close frame instead
// of a reset.
func (c *wsConn) readFailed(err error) {
	if errors.Is(err, websocket.ErrReadLimit) {
		nc := c.ws.NetConn()
		_ = nc.SetReadDeadline(time.Now().Add(c.cfg.CloseTimeout))
		_, _ = io.Copy(io.Discard, nc)
		err = fmt.Errorf("dataplane: inbound frame over the read limit of %d bytes (W2): %w", c.cfg.ReadLimit, err)
	} else {
		err = fmt.Errorf("dataplane: read: %w", err)
	}
	c.shutdown(err)
}

func (c *wsConn) writer() {
	defer c.wg.Done()
	for {
		select {
		case <-c.pings:
			deadline := time.Now().Add(c.cfg.WriteTimeout)
			if err := c.ws.WriteControl(websocket.PingMessage, nil, deadline); err != nil {
				c.shutdown(fmt.Errorf("dataplane: ping: %w", err))
				return
			}
		case <-c.closing:
			// Wait for a data frame being written, so the close frame
			// follows it whole.
			select {
			case c.wlock <- struct{}{}:
			case <-c.done:
				return
			}
			msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
			_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.cfg.WriteTimeout))
			return
		case <-c.done:
			return
		}
	}
}

// writeData writes one data frame: it takes wlock (or gives up when the
// connection closes or ctx ends first), then writes with a deadline.
func (c *wsConn) writeData(ctx context.Context, data []byte) error {
	if err := c.lockWrite(ctx); err != nil {
		return err
	}
	defer func() { <-c.wlock }()
	return c.writeLocked(ctx, data)
}

// lockWrite takes wlock. A closing or closed connection refuses the write.
func (c *wsConn) lockWrite(ctx context.Context) error {
	select {
	case c.wlock <- struct{}{}:
	default:
		select {
		case c.wlock <- struct{}{}:
		case <-c.closing:
			return closedErr()
		case <-c.done:
			return c.cause()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-c.closing:
		<-c.wlock
		return closedErr()
	case <-c.done:
		<-c.wlock
		return c.cause()
	default:
	}
	return nil
}

// writeLocked writes a data frame; wlock is held. A failed write ends the
// connection: it may leave half a frame on the wire, and gorilla treats
// it as fatal too.
func (c *wsConn) writeLocked(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err // nothing left: the connection is intact
	}
	err := c.writeFrame(ctx, data)
	if err == nil || errors.Is(err, websocket.ErrCloseSent) {
		return err // after close sent, the reader ends the connection with the peer's reason
	}
	c.shutdown(fmt.Errorf("dataplane: write: %w", err))
	return err
}

func (c *wsConn) writeFrame(ctx context.Context, data []byte) error {
	deadline := time.Now().Add(c.cfg.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.ws.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// schedulePing arms the next keepalive tick. Each tick asks the writer for
// a ping and arms a pong check that ends the connection if nothing at all
// arrived from the peer within PongTimeout.
func (c *wsConn) schedulePing() {
	if c.cfg.PingInterval < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.pingTimer = c.cfg.Clock.AfterFunc(c.cfg.PingInterval, c.tick)
}

func (c *wsConn) tick() {
	seen := c.alive.Load()
	select {
	case c.pings <- struct{}{}:
	default: // a ping is already queued
	}
	c.mu.Lock()
	if !c.stopped {
		c.pongTimer = c.cfg.Clock.AfterFunc(c.cfg.PongTimeout, func() {
			if c.alive.Load() == seen {
				c.shutdown(errPongTimeout)
			}
		})
	}
	c.mu.Unlock()
	c.schedulePing()
}

// shutdown ends the connection at once: timers stop, the socket closes,
// and every blocked Read and Write returns err (the first cause wins).
func (c *wsConn) shutdown(err error) {
	c.downOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.stopped = true
		if c.pingTimer != nil {
			c.pingTimer.Stop()
		}
		if c.pongTimer != nil {
			c.pongTimer.Stop()
		}
		c.mu.Unlock()
		close(c.done)
		_ = c.ws.NetConn().Close()
	})
}

func (c *wsConn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Read implements Conn.
func (c *wsConn) Read(ctx context.Context) (*imv2.Packet, error) {
	select {
	case it := <-c.in:
		return it.p, it.err
	case <-c.done:
		return nil, c.cause()
	case <-c.closing:
		return nil, closedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write implements Conn. A packet larger than the read limit is refused
// with a non-retryable invalid_packet error and the connection stays up:
// the peer would have to close on it (W2). The packet is encoded into the
// connection's buffer while the write lock is held, so a frame costs no
// allocation.
func (c *wsConn) Write(ctx context.Context, p *imv2.Packet) error {
	if err := c.lockWrite(ctx); err != nil {
		// A packet this side would never send is reported as such first.
		data, eerr := p.Encode()
		switch {
		case eerr != nil:
			return eerr
		case int64(len(data)) > c.cfg.ReadLimit:
			return imv2.Errorf(imv2.CodeInvalidPacket, "%s packet is %d bytes, over the frame limit of %d (W2)", p.Type, len(data), c.cfg.ReadLimit)
		}
		return err
	}
	defer func() { <-c.wlock }()
	data, err := p.AppendEncode(c.wbuf[:0])
	if err != nil {
		return err
	}
	if cap(data) <= maxKeptBuffer {
		c.wbuf = data
	}
	if int64(len(data)) > c.cfg.ReadLimit {
		return imv2.Errorf(imv2.CodeInvalidPacket, "%s packet is %d bytes, over the frame limit of %d (W2)", p.Type, len(data), c.cfg.ReadLimit)
	}
	return c.writeLocked(ctx, data)
}

// maxKeptBuffer bounds the read and encode buffers a connection keeps
// between frames; a larger frame gets a buffer of its own.
const maxKeptBuffer = 64 << 10

// Close implements Conn: it sends a normal close frame, waits up to
// CloseTimeout for the peer's, closes the socket and waits for the reader
// and writer goroutines.
func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		t := time.NewTimer(c.cfg.CloseTimeout)
		select {
		case <-c.readerDone:
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
		c.shutdown(closedErr())
		c.wg.Wait()
	})
	return nil
}

func closedErr() error { return imv2.Errorf(imv2.CodeClosed, "dataplane: connection closed") }
