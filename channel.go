package imv2

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/connid"
)

// Channel serves one connector_channel_id in one role. It is the delivery
// contract of the profile made the default: complete messages stay pending
// until a terminal ack and are resent with the same message_id (S1–S3);
// inbound messages reach the Target at most once per message_id, acked only
// after the Target returned (A6, M12, S6); deltas are sequenced, idempotent,
// bounded and cleared by the final (D2–D12); activity is a snapshot with a
// local timeout (C1–C8). Only packets the negotiated set allows travel
// (P5, P6).
//
// Every method is safe for concurrent use. Inbound packets are handed to
// Receive by whoever reads the connection; Receive never calls the Target
// on the caller's goroutine. A channel's messages reach its Target one at a
// time, in arrival order, so the platform shows them in the order they
// were sent: a slow Target call delays the channel's later messages and
// their acks (by at most Options.TargetTimeout each), never another
// channel's.
//
// Bounds (defaults in options.go, pending.go, idempotency.go): pending
// messages per channel (DefaultPendingCap, then Send returns pending_full),
// pending age (Options.PendingTTL, then OnFailed with code expired),
// messages queued for the Target (Options.MaxInflight, then rejected
// retryable channel_busy), resends waiting on one in-flight message
// (Options.MaxWaiters), open delta streams (Options.MaxOpenDeltas) and their
// text (Options.MaxDeltaBytes), idle delta streams (Options.DeltaIdleTTL),
// completed records (DefaultCompletedCap, DefaultCompletedTTL). Across
// channels, Options.Budget bounds the bytes of delta text and queued
// messages together (see Budget).
type Channel struct {
	id         string
	role       Role
	closed     bool          // guarded by mu
	delivering bool          // guarded by mu: a goroutine runs deliverQueue
	recording  chan struct{} // guarded by mu: closed when the last final deliverQueue left recording ended (deliver)
	target     Target        // its port capabilities (drafts, activity) are asserted where used (an idle channel stays small)
	o          Options
	log        *slog.Logger
	neg        atomic.Pointer[Negotiated]

	ctx    context.Context // cancelled by Close; parent of Target calls
	cancel context.CancelFunc
	wg     sync.WaitGroup
	active atomic.Int64 // goroutines and timer callbacks running; tests wait for 0

	mu        sync.Mutex
	transport Transport
	// The maps are made on first use: an idle channel holds none (see
	// BenchmarkIdleChannels).
	out      map[string]*outgoing    // sender: pending messages by message_id
	waiting  []*outgoing             // sender: pending, not yet in the send window, oldest first
	unacked  int                     // sender: messages in the send window
	inflight map[string]*delivery    // receiver: queued or running Target calls, by message_id
	queue    []*delivery             // receiver: Target calls in arrival order
	deltas   map[string]*deltaStream // receiver: open delta streams, by message_id
	sweep    clock.Timer             // delta idle sweep, armed while deltas is not empty
	held     int64                   // bytes reserved from o.Budget (deltas, queued messages)
	act      *activityState          // C1–C8, made on the first snapshot shown
	dl       *deadlines              // sender: the next step of each pending message, made on first use
	rm       *removals               // sender: pending-store Removes queued off the reader, made on first use
	refusals int                     // receiver: deltas waiting off the reader to be ignored or refused (refuseUnlessCompletedLocked)

	ord *orderState // both sides' order (order.go), made on first use
}

// NewChannel returns a Channel serving channel id in role, with the
// negotiated set n (from Catalog.Negotiate), the transport t to the peer
// (nil while disconnected) and the Target that receives complete inbound
// messages. Pending messages already in opts.Pending for this channel (a
// restart) are resent as soon as a transport is set.
func NewChannel(id string, role Role, n *Negotiated, t Transport, target Target, opts *Options) (*Channel, error) {
	// Programming errors, not wire errors: plain errors.
	if id == "" {
		return nil, errors.New("imv2: NewChannel: empty connector_channel_id")
	}
	if role != RoleConnector && role != RoleXAgent {
		return nil, errors.New("imv2: NewChannel: invalid role")
	}
	if target == nil {
		return nil, errors.New("imv2: NewChannel: nil Target")
	}
	o := opts.withDefaults()
	// The store calls' contexts derive from ctx: a durable store reads the
	// connector_id from them for its shares (internal/connid).
	ctx, cancel := context.WithCancel(connid.WithConnectorID(context.Background(), o.ConnectorID))
	c := &Channel{
		id:        id,
		role:      role,
		target:    target,
		o:         o,
		log:       channelLogger(o.Logger, id, role),
		ctx:       ctx,
		cancel:    cancel,
		transport: t,
	}
	if n == nil {
		n = &Negotiated{}
	}
	c.neg.Store(n)
	if err := c.restorePending(); err != nil {
		cancel()
		return nil, err
	}
	return c, nil
}

// ID returns the channel's connector_channel_id.
func (c *Channel) ID() string { return c.id }

// Renegotiate replaces the negotiated set, for example after a Descriptor
// whose profiles changed (P5). Packets already accepted finish normally.
func (c *Channel) Renegotiate(n *Negotiated) {
	if n == nil {
		n = &Negotiated{}
	}
	c.neg.Store(n)
}

// SetTransport connects the channel to t, or disconnects it (t == nil).
// A disconnect is never success: pending messages stay pending (A5). On
// connect every pending message is resent at once with its message_id and
// content, and nothing already acknowledged is (S10).
func (c *Channel) SetTransport(t Transport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.transport = t
	if t == nil {
		// The peer's connection (or the channel) closed: nothing extends
		// its streams there, so their budget goes back now, not after
		// DeltaIdleTTL (its final, when resent, carries the whole text).
		c.dropDeltasLocked(func(*deltaStream) bool { return true })
	}
	for _, o := range c.out {
		c.unscheduleLocked(o)
		if t == nil {
			c.armExpiryLocked(o)
		}
	}
	if t == nil || len(c.out) == 0 {
		return
	}
	resend := make([]*outgoing, 0, len(c.out))
	for _, o := range c.out {
		if o.inWindow {
			resend = append(resend, o)
		} else {
			c.armExpiryLocked(o)
		}
	}
	sortOutgoing(resend)
	for _, o := range resend {
		c.queueLocked(o)
	}
	c.spawnLocked(func() { c.drain(nil) })
}

// Close stops every timer and goroutine the channel started, cancelling
// Target calls in flight (their messages are not acked, so the sender
// resends them later). Pending messages stay in the PendingStore. Close is
// idempotent.
func (c *Channel) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.releaseAllLocked()
	if c.dl != nil {
		c.stopDeadlinesLocked()
	}
	stopTimer(&c.sweep)
	if c.act != nil {
		stopTimer(&c.act.timeout)
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// Receive handles one inbound packet addressed to this channel. It answers
// acks and error packets itself through the transport. The returned error
// is for the caller's log only: the peer has already been answered.
// Packets outside the negotiated set are dropped silently (P6, X1).
func (c *Channel) Receive(ctx context.Context, p *Packet) error {
	if p == nil {
		return Errorf(CodeInvalidPacket, "Receive: nil packet")
	}
	if p.ConnectorChannelID != c.id {
		return Errorf(CodeChannelNotOpen, "Receive: packet for channel %q handed to %q", p.ConnectorChannelID, c.id)
	}
	if c.isClosed() {
		return ErrClosed
	}
	if p.Type == TypeError {
		e := p.Err()
		code := Code("")
		if e != nil {
			code = e.Code
		}
		c.observe(Event{Kind: EventPeerError, PacketType: p.Type, Code: code})
		c.log.Debug("peer error", "code", code, "reply_to", p.ReplyTo)
		return nil
	}
	if !c.neg.Load().Allows(p.Type, c.role.inbound()) {
		c.observe(Event{Kind: EventDropped, PacketType: p.Type})
		c.log.Debug("dropped packet outside the negotiated set", "type", p.Type)
		return nil
	}
	switch p.Type {
	case TypeChatMessage:
		return c.receiveMessage(ctx, p)
	case TypeChatMessageDelta:
		return c.receiveDelta(ctx, p)
	case TypeChatMessageAck:
		return c.receiveAck(ctx, p)
	case TypeChatActivity:
		return c.receiveActivity(ctx, p)
	}
	// Allowed by a profile but not served by this runtime.
	c.observe(Event{Kind: EventDropped, PacketType: p.Type})
	return nil
}

func (c *Channel) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// send transmits p on the current transport; a nil transport or a closed
// channel is an error.
func (c *Channel) send(ctx context.Context, p *Packet) error {
	c.mu.Lock()
	t, closed := c.transport, c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if t == nil {
		return Errorf(CodeChannelUnavailable, "channel %q is disconnected", c.id)
	}
	return t.Send(ctx, p)
}

// reply sends an ack or error packet; failures are logged, since the peer
// resends what it did not see acknowledged.
func (c *Channel) reply(p *Packet) {
	if err := c.send(c.ctx, p); err != nil {
		c.log.Debug("reply not sent", "type", p.Type, "err", err)
	}
}

// spawnLocked runs f on a goroutine Close waits for. c.mu must be held.
func (c *Channel) spawnLocked(f func()) bool {
	if c.closed {
		return false
	}
	c.wg.Add(1)
	c.active.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.active.Add(-1)
		f()
	}()
	return true
}

// afterLocked runs f after d, unless the channel closes first. f runs on
// the clock's goroutine (a fake clock runs it inside Advance, so tests are
// deterministic) and Close waits for it. c.mu must be held.
func (c *Channel) afterLocked(d time.Duration, f func()) clock.Timer {
	return c.o.Clock.AfterFunc(d, func() {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		c.wg.Add(1)
		c.active.Add(1)
		c.mu.Unlock()
		defer c.wg.Done()
		defer c.active.Add(-1)
		f()
	})
}

// channelLogger returns l with the channel's attributes. A logger that
// discards everything (the default) is kept as is: its attributes would
// cost every idle channel a few hundred bytes for nothing.
func channelLogger(l *slog.Logger, id string, role Role) *slog.Logger {
	if l.Handler() == slog.DiscardHandler {
		return l
	}
	return l.With("connector_channel_id", id, "role", role.String())
}

func (c *Channel) observe(e Event) {
	e.ChannelID = c.id
	c.o.Observer.Observe(e)
}

func stopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}
