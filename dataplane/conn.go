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

	// helloLimit, when set, bounds inbound frames until raiseReadLimit:
	// the Server's connections read at most a hello's worth before it.
	helloLimit int64
	onPong     func() // test hook: a pong arrived
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

// errSlowMessage ends a connection whose peer began a message before a
// keepalive ping and had not finished it by that ping's pong check.
var errSlowMessage = errors.New("dataplane: a message begun before a keepalive ping was not finished within the pong timeout")

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

// wsConn is the Conn over gorilla/websocket. One goroutine reads (the
// reader). Data frames are written with write coalescing (connwrite.go):
// Write queues the encoded frame and the writer goroutine sends what is
// queued together, in one write(2) when the connection runs over a
// batchConn. The writer goroutine also sends the control frames (ping,
// close).
type wsConn struct {
	ws  *websocket.Conn
	bc  *batchConn // nil: frames leave one write(2) each
	cfg ConnConfig

	in      chan readItem                  // reader → Read
	handoff chan func(*imv2.Packet, error) // serve → reader: the handler that replaces Read
	hmu     sync.Mutex                     // held by the reader while the handler runs
	hoff    bool                           // guarded by hmu: serve returned, the handler is not to run again
	// hstate holds handlerRunning and handlerClosed, changed together
	// atomically: a handler call starts only before Close begins, and
	// Close knows whether one is running (it may block, or be the caller
	// of Close: Close does not wait for the reader then, serve's caller
	// does).
	hstate  atomic.Uint32
	pings   chan struct{} // keepalive tick → writer, capacity 1
	kick    chan struct{} // capacity 1: frames queued, the writer goroutine is to write them
	closing chan struct{} // closed when Close starts: no new writes
	done    chan struct{} // closed at shutdown: everything stops

	qmu       sync.Mutex
	pend      []byte        // guarded by qmu: the queued frames' payloads, back to back
	pendN     []int         // guarded by qmu: their lengths
	writing   bool          // guarded by qmu: the writer goroutine has the queue
	wclosed   bool          // guarded by qmu: Close began, no new frames
	idle      chan struct{} // guarded by qmu: closed when writing ends
	room      chan struct{} // guarded by qmu: closed when the queue is taken
	lastWrite int64         // guarded by qmu: when the previous Write came, ns since epoch
	epoch     time.Time     // the connection's start, for lastWrite
	wbuf      []byte        // owned by the writer role: a direct frame's buffer
	spare     []byte        // owned by the writer goroutine: the next queue buffer
	spareN    []int         // owned by the writer goroutine: the next lengths buffer

	gatherMiss int // owned by the writer goroutine: futile yields in a row (gather)
	gatherSkip int // owned by the writer goroutine: batches left without gather

	readerDone chan struct{} // closed when the reader goroutine ends
	writerDone chan struct{} // closed when the writer goroutine ends

	alive atomic.Uint64 // frames and pongs received: proof of life
	// reading is odd while a message is being read (incremented as it
	// begins and as it ends): a message begun before a keepalive ping
	// must end before that ping's pong check.
	reading atomic.Uint64
	limit   int64 // owned by the reader: the read limit in force

	closeOnce sync.Once
	downOnce  sync.Once
	mu        sync.Mutex
	err       error       // why the connection ended
	pingTimer clock.Timer // guarded by mu
	pongTimer clock.Timer // guarded by mu
	stopped   bool        // guarded by mu: no more timers
}

// The bits of wsConn.hstate.
const (
	handlerRunning = 1 << iota // the reader is in serve's handler
	handlerClosed              // Close began: no handler call starts
)

type readItem struct {
	p   *imv2.Packet
	err error
}

// newWSConn wraps an established WebSocket and starts its reader and
// writer goroutines; Close stops both. Frames are coalesced if the
// WebSocket runs over a batchConn.
func newWSConn(ws *websocket.Conn, cfg ConnConfig) *wsConn {
	bc, _ := ws.NetConn().(*batchConn)
	return newBatchedWSConn(ws, bc, cfg)
}

// newBatchedWSConn is newWSConn over the batchConn bc under ws (nil: no
// coalescing), for a TLS connection whose NetConn is not bc itself.
func newBatchedWSConn(ws *websocket.Conn, bc *batchConn, cfg ConnConfig) *wsConn {
	cfg = cfg.withDefaults()
	c := &wsConn{
		ws:         ws,
		bc:         bc,
		cfg:        cfg,
		in:         make(chan readItem),
		handoff:    make(chan func(*imv2.Packet, error)),
		pings:      make(chan struct{}, 1),
		kick:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
		epoch:      time.Now(),
		lastWrite:  -int64(busyWindow) - 1, // the first frame finds the connection quiet
	}
	c.limit = cfg.ReadLimit
	if cfg.helloLimit > 0 {
		c.limit = min(cfg.helloLimit, cfg.ReadLimit)
	}
	ws.SetReadLimit(c.limit)
	ws.SetPongHandler(func(string) error {
		c.alive.Add(1)
		if cfg.onPong != nil {
			cfg.onPong()
		}
		return nil
	})
	go c.reader()
	go c.writer()
	c.schedulePing()
	return c
}

func (c *wsConn) reader() {
	defer close(c.readerDone)
	// One buffer for every frame: DecodePacket copies what it keeps. A
	// buffer grown by a large frame is dropped, not kept for the
	// connection's life.
	var buf bytes.Buffer
	var handle func(*imv2.Packet, error) // from serve: frames are handled here, not passed to Read
	for {
		mt, r, err := c.ws.NextReader()
		if err == nil {
			if buf.Cap() > maxKeptBuffer {
				buf = bytes.Buffer{}
			}
			buf.Reset()
			c.reading.Add(1)
			_, err = buf.ReadFrom(r)
			c.reading.Add(1)
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
		if handle != nil {
			c.handle(handle, it)
			continue
		}
		select {
		case c.in <- it:
		case handle = <-c.handoff:
			c.handle(handle, it)
		case <-c.closing:
			// Closing: keep reading only to see the peer's close frame.
		case <-c.done:
			return
		}
	}
}

// handle runs the handler serve handed over on one frame, on the reader
// goroutine, unless serve has returned or the connection is closing
// (then frames are read only to see the peer's close frame, as in Read).
func (c *wsConn) handle(h func(*imv2.Packet, error), it readItem) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.hoff {
		return
	}
	for {
		s := c.hstate.Load()
		if s&handlerClosed != 0 {
			return
		}
		if c.hstate.CompareAndSwap(s, s|handlerRunning) {
			break
		}
	}
	defer c.hstate.And(^uint32(handlerRunning))
	h(it.p, it.err)
}

// serve implements servingConn: the reader goroutine runs h on each
// frame itself, decoded, instead of handing it to Read, so a packet
// costs no goroutine switch between the socket and its handler. The
// reader reads the next frame only when h returned: a slow h holds the
// connection's reading as a slow Read caller does (backpressure, never a
// buffer). serve returns as Read would end (the connection ended, Close,
// ctx), after the last call of h returned; h is not called again, and
// the Conn is not to be read afterwards. When the connection has ended,
// serve also waits for the reader goroutine to end: Close does not wait
// for a reader that is running h (h may be what called Close), so the
// reader's end is awaited here, by the goroutine that owns serve.
func (c *wsConn) serve(ctx context.Context, h func(*imv2.Packet, error)) error {
	select {
	case c.handoff <- h: // the reader runs h until one of the ends below
	case <-c.done:
	case <-c.closing:
	case <-ctx.Done():
	}
	var err error
	select {
	case <-c.done:
		err = c.cause()
	case <-c.closing:
		err = closedErr()
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.hmu.Lock()
	c.hoff = true
	c.hmu.Unlock()
	select {
	case <-c.done:
		// The socket is closed: the reader, out of h, ends at its next
		// read.
		<-c.readerDone
	default:
		// Not ended (ctx, or Close still waiting for the peer's close
		// frame): Close waits for the reader, which runs no h again.
	}
	return err
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
		err = fmt.Errorf("dataplane: inbound frame over the read limit of %d bytes (W2): %w", c.limit, err)
	} else {
		err = fmt.Errorf("dataplane: read: %w", err)
	}
	c.shutdown(err)
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
	msg := c.reading.Load()
	select {
	case c.pings <- struct{}{}:
	default: // a ping is already queued
	}
	c.mu.Lock()
	if !c.stopped {
		c.pongTimer = c.cfg.Clock.AfterFunc(c.cfg.PongTimeout, func() {
			switch {
			case c.alive.Load() == seen:
				c.shutdown(errPongTimeout)
			case msg%2 == 1 && c.reading.Load() == msg:
				// Pongs alone do not keep a message open: a peer that
				// starts a large frame and never finishes it would hold
				// its buffer for good.
				c.shutdown(errSlowMessage)
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

// raiseReadLimit lifts the hello's read limit to ReadLimit. It runs on
// the reader goroutine (in serve's handler), the only one reading ws.
func (c *wsConn) raiseReadLimit() {
	if c.limit != c.cfg.ReadLimit {
		c.limit = c.cfg.ReadLimit
		c.ws.SetReadLimit(c.limit)
	}
}

// maxKeptBuffer bounds the read and encode buffers a connection keeps
// between frames; a larger frame gets a buffer of its own.
const maxKeptBuffer = 64 << 10

// Close implements Conn: it sends a normal close frame, waits up to
// CloseTimeout for the peer's, closes the socket and waits for the reader
// and writer goroutines. While the reader runs serve's handler, which may
// block or be the caller of Close, Close waits only for the close frame
// to be written (at most CloseTimeout), not for the peer's (the reader
// cannot read it meanwhile), and not for the reader: serve awaits it.
func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		inHandler := c.hstate.Or(handlerClosed)&handlerRunning != 0
		close(c.closing)
		sent := c.readerDone // the peer's close frame was read
		if inHandler {
			sent = c.writerDone // ours was written
		}
		t := time.NewTimer(c.cfg.CloseTimeout)
		select {
		case <-sent:
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
		c.shutdown(closedErr())
		<-c.writerDone
		if !inHandler {
			<-c.readerDone
		}
	})
	return nil
}

func closedErr() error { return imv2.Errorf(imv2.CodeClosed, "dataplane: connection closed") }

// servingConn is a Conn whose reader can run a handler on each packet
// itself (wsConn.serve), saving the goroutine switch of Read.
type servingConn interface {
	serve(ctx context.Context, h func(*imv2.Packet, error)) error
}

// readEach calls h on every packet conn reads, one at a time and in
// order, until the connection ends, and returns why (an error of Read).
// err given to h is an invalid frame (E2, p as far as it decoded): the
// connection goes on. A Conn that can run h on its own reader does so.
func readEach(ctx context.Context, conn Conn, h func(p *imv2.Packet, err error)) error {
	if sc, ok := conn.(servingConn); ok {
		return sc.serve(ctx, h)
	}
	for {
		p, err := conn.Read(ctx)
		if err != nil && !isInvalidFrame(err) {
			return err
		}
		h(p, err)
	}
}
