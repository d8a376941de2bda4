package imv2test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
)

// frame is one frame received from the implementation under test.
type frame struct {
	p   *imv2.Packet // nil when the frame is not a valid envelope
	raw []byte
	doc any   // the whole frame decoded as JSON, for matching and saving
	err error // why the envelope is invalid (E1, W2)
	at  time.Time
	// orig is the script's packet_id when the frame answers the suite's
	// resend of it (resend.go), else "".
	orig string
}

// replyTo is the packet_id the frame answers, as the script knows it: a
// resend's answer counts as the answer to the script's packet.
func (f *frame) replyTo() string {
	if f.orig != "" {
		return f.orig
	}
	return f.p.ReplyTo
}

// peer is the suite's end of one data-plane WebSocket. It speaks raw
// frames, so a script can send malformed, duplicated, out-of-order and
// gapped packets, and it queues every received frame until a command
// consumes it.
type peer struct {
	ws  *websocket.Conn
	wmu sync.Mutex

	mu      sync.Mutex
	queue   []*frame // received, not consumed
	invalid []*frame // invalid envelopes not yet reported
	wake    chan struct{}
	err     error // why the connection ended
	done    chan struct{}

	rs *resender // resends finals rejected retryable; nil on the xAgent side
}

// peerReadLimit bounds one received frame; larger frames end the peer.
const peerReadLimit = 16 << 20

// maxQueued bounds the received frames no command consumed yet; a peer
// that sends more ends the connection (a flood is no conformant answer).
const maxQueued = 100_000

// newPeer starts reading ws. rs, when not nil, resends the finals the
// script sends whenever they are rejected retryable (the suite plays
// xAgent).
func newPeer(ws *websocket.Conn, rs *resender) *peer {
	ws.SetReadLimit(peerReadLimit)
	p := &peer{ws: ws, wake: make(chan struct{}), done: make(chan struct{}), rs: rs}
	go p.read()
	return p
}

func (p *peer) read() {
	defer close(p.done)
	for {
		kind, data, err := p.ws.ReadMessage()
		if err != nil {
			p.mu.Lock()
			p.err = err
			close(p.wake)
			p.wake = make(chan struct{})
			p.mu.Unlock()
			return
		}
		f := &frame{raw: data, at: time.Now()}
		if kind != websocket.TextMessage {
			f.err = errors.New("a binary frame (W2: text frames only)")
		} else if pkt, err := imv2.DecodePacket(data); err != nil {
			f.err = err
		} else {
			f.p = pkt
			f.doc, _ = decodeJSON(string(data))
			if p.rs != nil {
				f.orig = p.rs.origin(pkt.ReplyTo)
				if pkt.Type == imv2.TypeChatMessageAck && p.rs.onAck(f, p.sendResend, p.release) {
					continue // held back: the final is resent
				}
			}
		}
		p.mu.Lock()
		if len(p.queue)+len(p.invalid) >= maxQueued {
			p.err = fmt.Errorf("more than %d frames left unread", maxQueued)
			close(p.wake)
			p.wake = make(chan struct{})
			p.mu.Unlock()
			_ = p.ws.Close()
			return
		}
		if f.err != nil {
			p.invalid = append(p.invalid, f)
		} else {
			p.queue = append(p.queue, f)
		}
		close(p.wake)
		p.wake = make(chan struct{})
		p.mu.Unlock()
	}
}

// release queues a frame held back for a resend that could not go out.
func (p *peer) release(f *frame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, f)
	close(p.wake)
	p.wake = make(chan struct{})
}

// sendPacket encodes and writes p, remembering a final for resends.
func (p *peer) sendPacket(pkt *imv2.Packet) error {
	data, err := pkt.Encode()
	if err != nil {
		return fmt.Errorf("cannot encode the packet (use sendraw for malformed ones): %v", err)
	}
	if p.rs != nil {
		p.rs.track(pkt)
	}
	if err := p.send(data, false); err != nil {
		return fmt.Errorf("write: %v", err)
	}
	return nil
}

// sendResend writes a resend, which the resender tracks itself.
func (p *peer) sendResend(pkt *imv2.Packet) error {
	data, err := pkt.Encode()
	if err != nil {
		return err
	}
	return p.send(data, false)
}

// send writes one frame.
func (p *peer) send(data []byte, binary bool) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	kind := websocket.TextMessage
	if binary {
		kind = websocket.BinaryMessage
	}
	return p.ws.WriteMessage(kind, data)
}

// close drops the connection without a close handshake (a network break)
// and waits for the reader to stop.
func (p *peer) close() {
	if p.rs != nil {
		p.rs.close()
	}
	_ = p.ws.Close()
	<-p.done
}

// takeInvalid returns the invalid frames received since the last call.
func (p *peer) takeInvalid() []*frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.invalid
	p.invalid = nil
	return out
}

// await removes and returns the first queued or arriving frame pick
// accepts, waiting until deadline. It fails when the connection ends
// first, with what it saw meanwhile for the reason.
func (p *peer) await(ctx context.Context, deadline time.Time, pick func(*frame) bool) (*frame, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		p.mu.Lock()
		for i, f := range p.queue {
			if pick(f) {
				p.queue = append(p.queue[:i:i], p.queue[i+1:]...)
				p.mu.Unlock()
				return f, nil
			}
		}
		wake, err := p.wake, p.err
		p.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("connection ended: %v", err)
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, errTimeout
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

var errTimeout = errors.New("timeout")

// seen returns the queued frames, for a reason that says what did arrive.
func (p *peer) seen() []*frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*frame(nil), p.queue...)
}

// describe renders a frame in one short line.
func describe(f *frame) string {
	if f.p == nil {
		return fmt.Sprintf("invalid frame %q", clip(string(f.raw), 60))
	}
	s := f.p.Type
	if f.p.Error != nil {
		s += " " + string(f.p.Error.Code)
	}
	if m, ok := walk(f.doc, "payload.message_id"); ok {
		s += fmt.Sprintf(" message_id=%v", m)
	}
	if m, ok := walk(f.doc, "payload.status"); ok {
		s += fmt.Sprintf(" status=%v", m)
	}
	if m, ok := walk(f.doc, "payload.code"); ok && f.p.Type == imv2.TypeChatMessageAck {
		s += fmt.Sprintf(" code=%v", m)
	}
	if m, ok := walk(f.doc, "payload.retryable"); ok && f.p.Type == imv2.TypeChatMessageAck {
		s += fmt.Sprintf(" retryable=%v", m)
	}
	if f.p.ReplyTo != "" {
		s += " reply_to=" + clip(f.p.ReplyTo, 24)
		if f.orig != "" {
			s += " (a resend of " + clip(f.orig, 24) + ")"
		}
	}
	return s
}
