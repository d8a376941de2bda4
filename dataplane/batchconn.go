package dataplane

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// maxBatchBytes bounds the bytes a batchConn gathers before it writes:
// a batch larger than this leaves in several writes of about this size.
const maxBatchBytes = 64 << 10

// batchConn is the net.Conn under a WebSocket whose frame writes can be
// gathered: between begin and end, Write appends to a buffer, and end
// sends the buffer in one write(2). Outside a batch Write goes straight
// through, so a lone frame costs no copy and no delay. gorilla/websocket
// serialises its own writes (data and control frames); mu orders them
// with begin and end, which run on the batch writer (see wsConn.Write).
type batchConn struct {
	net.Conn

	mu       sync.Mutex
	batching bool      // guarded by mu
	buf      []byte    // guarded by mu: the frames of the open batch
	wd       time.Time // guarded by mu: the write deadline last set
}

// SetWriteDeadline implements net.Conn. gorilla/websocket sets the write
// deadline before every frame, the same one until the next
// websocket.Conn.SetWriteDeadline (once per batch here); a repeat is not
// passed down, as each costs the runtime a timer update.
func (b *batchConn) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !t.IsZero() && t.Equal(b.wd) {
		return nil
	}
	if err := b.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	b.wd = t
	return nil
}

// SetDeadline implements net.Conn.
func (b *batchConn) SetDeadline(t time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.Conn.SetDeadline(t); err != nil {
		return err
	}
	b.wd = t
	return nil
}

// Write implements net.Conn.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.batching {
		return b.Conn.Write(p)
	}
	if len(b.buf)+len(p) > maxBatchBytes {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) >= maxBatchBytes {
			return b.Conn.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// begin opens a batch: writes gather until end.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.batching = true
	b.mu.Unlock()
}

// end closes the batch and writes what it gathered, under the write
// deadline gorilla set for the last frame.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batching = false
	err := b.flushLocked()
	if cap(b.buf) > 2*maxBatchBytes {
		b.buf = nil // an outsized frame passed through: do not keep its buffer
	}
	return err
}

func (b *batchConn) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// batchSlot records the batchConn a dial or an upgrade made, so the
// wsConn over it can gather its frames.
type batchSlot struct{ bc *batchConn }

// dialer returns a copy of d whose TCP connections are batchConns
// recorded in the slot. A dialer with NetDialTLSContext keeps its own
// connections for wss URLs (the slot stays empty and frames are written
// one by one).
func (s *batchSlot) dialer(d websocket.Dialer) websocket.Dialer {
	dial := d.NetDialContext
	if dial == nil {
		if d.NetDial != nil {
			nd := d.NetDial
			dial = func(_ context.Context, network, addr string) (net.Conn, error) { return nd(network, addr) }
		} else {
			var nd net.Dialer
			dial = nd.DialContext
		}
	}
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s.bc = &batchConn{Conn: nc}
		return s.bc, nil
	}
	return d
}

// responseWriter wraps w so that the connection gorilla's Upgrade
// hijacks is a batchConn recorded in the slot.
func (s *batchSlot) responseWriter(w http.ResponseWriter) http.ResponseWriter {
	return &hijackWriter{ResponseWriter: w, slot: s}
}

type hijackWriter struct {
	http.ResponseWriter
	slot *batchSlot
}

// Hijack implements http.Hijacker.
func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.slot.bc = &batchConn{Conn: nc}
	return h.slot.bc, brw, nil
}

// Unwrap lets http.ResponseController reach the writer's other methods.
func (h *hijackWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }
