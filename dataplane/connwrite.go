package dataplane

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
)

// Write coalescing. A frame on a quiet connection is written by the
// caller of Write at once, on its own goroutine (no hand-off: the lowest
// latency for a lone frame). A frame that comes while a write is in
// progress, or within busyWindow of the previous one (a busy stream), is
// encoded onto the queue (a buffer the connection reuses) and Write
// returns; the writer goroutine writes the queue, up to maxBatchBytes per
// write(2) (batchConn), until it is empty, so the caller goes on while
// the write(2) runs and the frames that follow it join the next one; a
// writer that finds only a few frames yields once first (gather).
// wsConn.writing is the writer role: held by a direct writer or by the
// writer goroutine, never both.

// maxQueuedBytes bounds the queue: a Write that finds more waits for the
// writer goroutine to take it (backpressure on a slow peer).
const maxQueuedBytes = 4 * maxBatchBytes

// busyWindow is how soon after the previous Write a frame counts as part
// of a busy stream: it is queued for the writer goroutine, so the caller
// goes on while the write(2) runs and the frames that follow can join it.
// A frame on a quiet connection is written by its caller at once, with no
// hand-off (the lowest latency for a lone frame).
const busyWindow = 25 * time.Microsecond

// Write implements Conn. A packet larger than the read limit is refused
// with a non-retryable invalid_packet error and the connection stays up:
// the peer would have to close on it (W2). A nil error means the frame is
// on its way, in the order the writes were accepted; a frame that then
// cannot be written ends the connection, and every later Read and Write
// reports why. (As with any socket write, success never meant delivery:
// the delivery state machines resend what the peer did not ack.) The
// packet is encoded into a buffer the connection reuses, so a frame costs
// no allocation.
func (c *wsConn) Write(ctx context.Context, p *imv2.Packet) error {
	if err := c.refusal(); err != nil {
		// A packet this side would never send is reported as such first.
		data, eerr := p.Encode()
		switch {
		case eerr != nil:
			return eerr
		case int64(len(data)) > c.cfg.ReadLimit:
			return tooBig(p, len(data), c.cfg.ReadLimit)
		}
		return err
	}
	return c.submit(ctx, p, nil)
}

// writeData writes one data frame as is (tests: frames a Conn never
// sends).
func (c *wsConn) writeData(ctx context.Context, data []byte) error {
	if err := c.refusal(); err != nil {
		return err
	}
	return c.submit(ctx, nil, data)
}

// refusal is the error a closing or closed connection gives a write:
// closed after Close, else why the connection ended.
func (c *wsConn) refusal() error {
	select {
	case <-c.closing:
		return closedErr()
	default:
	}
	select {
	case <-c.done:
		return c.cause()
	default:
		return nil
	}
}

// submit writes the frame of p (or data) at once if no write is in
// progress, else queues it for the writer goroutine.
func (c *wsConn) submit(ctx context.Context, p *imv2.Packet, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.qmu.Lock()
	for {
		if c.wclosed {
			c.qmu.Unlock()
			return closedErr()
		}
		select {
		case <-c.done:
			c.qmu.Unlock()
			return c.cause()
		default:
		}
		if len(c.pend) < maxQueuedBytes {
			break
		}
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.qmu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return c.cause()
		}
		c.qmu.Lock()
	}
	now := int64(time.Since(c.epoch))
	quiet := now-c.lastWrite > int64(busyWindow)
	c.lastWrite = now
	if !c.writing && quiet {
		c.writing = true
		c.qmu.Unlock()
		return c.writeDirect(ctx, p, data)
	}
	err := c.enqueueLocked(p, data)
	if err == nil && !c.writing {
		c.writing = true
		c.kick <- struct{}{}
	}
	c.qmu.Unlock()
	return err
}

// writeDirect writes one frame on the caller's goroutine, with the writer
// role taken, then passes the role to the writer goroutine if frames
// queued meanwhile, or gives it up.
func (c *wsConn) writeDirect(ctx context.Context, p *imv2.Packet, data []byte) error {
	var err error
	if p != nil {
		data, err = c.encode(p)
	}
	if err == nil {
		deadline := time.Now().Add(c.cfg.WriteTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err = c.ws.SetWriteDeadline(deadline); err == nil {
			err = c.ws.WriteMessage(websocket.TextMessage, data)
		}
		c.writeFailed(err)
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if len(c.pendN) > 0 {
		c.kick <- struct{}{}
		return err
	}
	c.releaseLocked()
	return err
}

// encode encodes p into the direct writer's buffer and checks it against
// the read limit (W2); the writer role is held.
func (c *wsConn) encode(p *imv2.Packet) ([]byte, error) {
	data, err := p.AppendEncode(c.wbuf[:0])
	if err != nil {
		return nil, err
	}
	if cap(data) <= maxKeptBuffer {
		c.wbuf = data
	}
	if int64(len(data)) > c.cfg.ReadLimit {
		return nil, tooBig(p, len(data), c.cfg.ReadLimit)
	}
	return data, nil
}

// enqueueLocked appends the frame's payload to the queue; qmu is held.
func (c *wsConn) enqueueLocked(p *imv2.Packet, data []byte) error {
	start := len(c.pend)
	if p != nil {
		var err error
		if c.pend, err = p.AppendEncode(c.pend); err != nil {
			c.pend = c.pend[:start]
			return err
		}
		if n := len(c.pend) - start; int64(n) > c.cfg.ReadLimit {
			c.pend = c.pend[:start]
			return tooBig(p, n, c.cfg.ReadLimit)
		}
	} else {
		c.pend = append(c.pend, data...)
	}
	c.pendN = append(c.pendN, len(c.pend)-start)
	return nil
}

// writeFailed ends the connection after a failed data write: it may
// leave half a frame on the wire, and gorilla treats it as fatal too.
// After close sent, the reader ends the connection with the peer's reason.
func (c *wsConn) writeFailed(err error) {
	if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
		c.shutdown(fmt.Errorf("dataplane: write: %w", err))
	}
}

// releaseLocked ends a writing spell; qmu is held and the queue empty.
func (c *wsConn) releaseLocked() {
	c.writing = false
	if c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// flushQueue runs on the writer goroutine: it writes the queue, batch by
// batch, until it is empty.
func (c *wsConn) flushQueue() {
	for {
		c.gather()
		c.qmu.Lock()
		if len(c.pendN) == 0 {
			c.releaseLocked()
			c.qmu.Unlock()
			return
		}
		buf, lens := c.pend, c.pendN
		c.pend, c.pendN = c.spare[:0], c.spareN[:0]
		if c.room != nil {
			close(c.room)
			c.room = nil
		}
		c.qmu.Unlock()

		err := c.writeQueued(buf, lens)
		if cap(buf) <= 2*maxQueuedBytes {
			c.spare, c.spareN = buf[:0], lens[:0]
		} else {
			c.spare, c.spareN = nil, nil
		}
		if err != nil {
			c.writeFailed(err)
			c.qmu.Lock()
			c.pend, c.pendN = c.pend[:0], c.pendN[:0] // the connection is gone
			c.releaseLocked()
			c.qmu.Unlock()
			return
		}
	}
}

// gatherFrames is the batch the writer goroutine waits for, once, before
// it writes: with fewer queued frames it yields first.
const gatherFrames = 4

// gatherRetry is how many batches the writer skips gather after it found
// gathering futile (see gather).
const gatherRetry = 64

// gather lets the goroutines already runnable on this P add their frames
// to the batch when the queue holds fewer than gatherFrames: on a
// connection whose frames come from many goroutines (a delivery goroutine
// per channel), a writer that woke on an idle core would otherwise write
// them one by one (ChannelsWS/ch-1000: 1.0 write(2) per message, 0.2 with
// it). A yield that gained no frame three times running (one sender, one
// message at a time) stops it for gatherRetry batches. Runs on the writer
// goroutine, which owns gatherMiss and gatherSkip.
func (c *wsConn) gather() {
	if c.gatherSkip > 0 {
		c.gatherSkip--
		return
	}
	c.qmu.Lock()
	n := len(c.pendN)
	c.qmu.Unlock()
	if n == 0 || n >= gatherFrames {
		return
	}
	runtime.Gosched()
	c.qmu.Lock()
	gained := len(c.pendN) > n
	c.qmu.Unlock()
	if gained {
		c.gatherMiss = 0
		return
	}
	if c.gatherMiss++; c.gatherMiss >= 3 {
		c.gatherMiss, c.gatherSkip = 0, gatherRetry
	}
}

// writeQueued writes queued frames, gathered into as few write(2) calls as
// maxBatchBytes allows.
func (c *wsConn) writeQueued(buf []byte, lens []int) error {
	if err := c.ws.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout)); err != nil {
		return err
	}
	if c.bc != nil {
		c.bc.begin()
	}
	var err error
	for _, n := range lens {
		if err = c.ws.WriteMessage(websocket.TextMessage, buf[:n]); err != nil {
			break
		}
		buf = buf[n:]
	}
	if c.bc != nil {
		if ferr := c.bc.end(); err == nil {
			err = ferr
		}
	}
	return err
}

func tooBig(p *imv2.Packet, n int, limit int64) error {
	return imv2.Errorf(imv2.CodeInvalidPacket, "%s packet is %d bytes, over the frame limit of %d (W2)", p.Type, n, limit)
}

// writer is the writer goroutine: keepalive pings, the queued frames, and
// the close frame, after every accepted frame.
func (c *wsConn) writer() {
	defer close(c.writerDone)
	for {
		select {
		case <-c.pings:
			deadline := time.Now().Add(c.cfg.WriteTimeout)
			if err := c.ws.WriteControl(websocket.PingMessage, nil, deadline); err != nil {
				c.shutdown(fmt.Errorf("dataplane: ping: %w", err))
				return
			}
		case <-c.kick:
			c.flushQueue()
		case <-c.closing:
			if c.drainForClose() {
				msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
				_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.cfg.WriteTimeout))
			}
			return
		case <-c.done:
			return
		}
	}
}

// drainForClose stops new frames and waits until the accepted ones are
// written, so the close frame follows them whole. It reports false if the
// connection ended meanwhile.
func (c *wsConn) drainForClose() bool {
	c.qmu.Lock()
	c.wclosed = true
	for c.writing {
		if c.idle == nil {
			c.idle = make(chan struct{})
		}
		idle := c.idle
		c.qmu.Unlock()
		select {
		case <-idle:
		case <-c.kick:
			c.flushQueue()
		case <-c.done:
			return false
		}
		c.qmu.Lock()
	}
	c.qmu.Unlock()
	return true
}
