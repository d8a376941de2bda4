package connector

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// InboundEvent is what a person wrote in a conversation on the platform,
// with the platform's own ID for it, as Receive takes it. (imv2.Event is
// something else: a Channel's observation, for metrics.)
type InboundEvent struct {
	// Conversation is the platform's conversation ID, the key bindings use.
	Conversation string
	// EventID is the platform's ID of the event (a Telegram update_id, a
	// Matrix event ID). The user message's message_id is derived from it
	// and Conversation, so a replayed event is a duplicate (S1, S8).
	EventID string
	// Text is the message text; Files its attachments. One of them is
	// needed.
	Text  string
	Files []InboundFile
}

// InboundFile is a user's file: the kit stores it for each bound channel
// and offers it to xAgent with a signed download_url (M6, T2, T3).
type InboundFile struct {
	// Filename is the user's name for the file; the store cleans it
	// (FileInfo.Filename).
	Filename string
	MimeType string // a hint; "" sniffs the bytes
	// Open returns the bytes, once per bound channel.
	Open func() (io.ReadCloser, error)
}

// eventSpace namespaces the UUIDs of inbound message IDs.
var eventSpace = uuid.MustParse("5d0c8a5e-6a34-4bde-9b7e-3f2a9c1d7e10")

// EventMessageID returns the message_id of the user message an event
// becomes: "msg_" and a name-based UUID of conversation and event ID, so
// the same event always gets the same ID, also after a restart.
func EventMessageID(conversation, eventID string) string {
	return "msg_" + uuid.NewSHA1(eventSpace, []byte(conversation+"\x00"+eventID)).String()
}

// ErrNoChannel is matched by Receive's error when a bound channel is not
// open on this Connector, no Options.Advanced.Relay is set and the Store's
// registry does not know the channel: the event is not sent to it, and
// receiving it again later is safe (the message_id is the same). A
// registered channel not reopened since a restart takes the event
// instead: it is kept in the pending store until xAgent reopens the
// channel (see park). A Listener's Inbox.Receive reports it only when no
// channel took the event.
var ErrNoChannel = errors.New("connector: bound channel is not open here")

// Relay hands a user message to whichever replica holds the channel's
// connection, for Connector replicas on one shared Store; pgstore.Relay is
// one. Send delivers through the channel when it is open here, otherwise
// through the shared pending store. When the Relay also has
// Serve(state.OpenChannels) and ChannelOpened(channelID string), as
// pgstore.Relay does, New calls Serve with its Server and ChannelOpened
// for every channel opened (before Options.Advanced.OnChannelOpen); running it
// (pgstore.Relay.Run) is the caller's. Files offered with an event are
// stored in this replica's FileStore: replicas need a shared one for
// xAgent to download them from any, and the same API key (or
// Options.Advanced.URLKey) so that any replica verifies the signed URL.
type Relay interface {
	Send(ctx context.Context, channelID string, m imv2.ChatMessage) (string, error)
}

// relayOpened tells a Relay that has ChannelOpened of every channel
// opened, then calls next.
func relayOpened(r Relay, next func(string)) func(string) {
	ro, ok := r.(interface{ ChannelOpened(string) })
	switch {
	case !ok:
		return next
	case next == nil:
		return ro.ChannelOpened
	}
	return func(id string) {
		ro.ChannelOpened(id)
		next(id)
	}
}

// Receive hands an inbound platform event to every channel bound to its
// conversation (connected bindings only), as a user message whose
// message_id is EventMessageID: pending until xAgent acks it, resent as the
// Channel does, and never a second message when the event is received
// again, also across a restart with a durable Store: a replay whose
// message is still pending, or was handed over before, is skipped before
// any of its files is stored again (the kit records every handed-over
// event in the Store's completed records, under the channel and the
// event's message_id, with their TTL and cap). It returns once the message
// is pending on every channel; an error joins what failed per channel (a
// channel's failure does not stop the others), ErrNotBound when none is
// bound. With Options.Advanced.Relay, a channel not open here goes through it.
//
// While a channel's pending store is full (imv2.CodePendingFull: xAgent
// acks nothing and the Store holds its cap of the channel's messages)
// Receive waits for room, trying again after 20 ms doubling to 1 s on the kit's
// clock, until ctx ends or the Connector closes (then its error matches
// both ctx's error, or imv2.ErrClosed, and CodePendingFull). A caller that
// hands a conversation's events one after another so keeps their order
// (package imv2, "Order"): the next is not taken before this one is
// pending. One line is logged when a channel's messages start waiting,
// one when they stop.
func (c *Connector) Receive(ctx context.Context, ev InboundEvent) error {
	return c.receive(ctx, ev, false)
}

// receive is Receive; with tolerateUnopened, a channel's ErrNoChannel
// fails the event only when no channel took it (a Listener's Inbox).
func (c *Connector) receive(ctx context.Context, ev InboundEvent, tolerateUnopened bool) error {
	if ev.EventID == "" || len(ev.EventID) > imv2.MaxIDBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "connector: InboundEvent.EventID must be 1 to %d bytes", imv2.MaxIDBytes)
	}
	ids, err := c.store.Channels(ctx, ev.Conversation)
	if err != nil {
		return err
	}
	id := EventMessageID(ev.Conversation, ev.EventID)
	var errs, unopened []error
	sent := 0
	for _, chID := range ids {
		b, ok, err := c.store.Binding(ctx, chID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok || b.State != state.BindingConnected {
			continue
		}
		if err := c.receiveOn(ctx, chID, id, ev); err != nil {
			err = fmt.Errorf("channel %s: %w", chID, err)
			if tolerateUnopened && errors.Is(err, ErrNoChannel) {
				unopened = append(unopened, err)
			} else {
				errs = append(errs, err)
			}
			continue
		}
		sent++
	}
	if sent == 0 {
		errs = append(errs, unopened...)
	} else if len(unopened) > 0 {
		c.log.Debug("connector: event not sent to channels not open here; their readers read it when they open", "message_id", id, "err", errors.Join(unopened...))
	}
	if sent == 0 && len(errs) == 0 {
		return fmt.Errorf("conversation %q: %w", ev.Conversation, ErrNotBound)
	}
	return errors.Join(errs...)
}

// receiveStripes is the number of locks Receive's events hash to.
const receiveStripes = 64

// receiveOn hands the event's message id to one channel, unless it did so
// before. While the channel's pending store is full it waits (waitRoom)
// with the event's lock released, its files kept offered, and then looks
// again whether a replay took the event meanwhile.
func (c *Connector) receiveOn(ctx context.Context, chID, id string, ev InboundEvent) (err error) {
	// One Receive of an event per channel at a time: a concurrent replay
	// then finds the message pending or recorded instead of racing it.
	h := fnv.New32a()
	h.Write([]byte(chID + "\x00" + id))
	mu := &c.recv[h.Sum32()%receiveStripes]
	var m *imv2.ChatMessage // built once; its files stay offered across waits
	wait := time.Duration(0)
	defer func() {
		if wait > 0 {
			c.roomWait(chID, -1, err == nil)
		}
	}()
	for {
		mu.Lock()
		full, err := c.receiveLocked(ctx, chID, id, ev, &m)
		mu.Unlock()
		if !full {
			return err
		}
		if wait == 0 {
			c.roomWait(chID, 1, false)
			wait = pendingFullBackoff
		}
		if serr := c.pause(ctx, wait); serr != nil {
			c.forget(chID, m.Files)
			return fmt.Errorf("%w, waiting for room: %w", err, serr)
		}
		wait = min(2*wait, pendingFullMaxBackoff)
	}
}

// Backoff of a Receive waiting for room in a channel's pending store.
const (
	pendingFullBackoff    = 20 * time.Millisecond
	pendingFullMaxBackoff = time.Second
)

// receiveLocked is one attempt of receiveOn, under the event's lock; full
// says the channel's pending store had no room (err is its error; the
// files of *m stay offered for the next attempt).
func (c *Connector) receiveLocked(ctx context.Context, chID, id string, ev InboundEvent, m **imv2.ChatMessage) (full bool, err error) {
	if seen, err := c.received(ctx, chID, id); err != nil || seen {
		if *m != nil { // a replay took the event while this one waited
			c.forget(chID, (*m).Files)
		}
		return false, err
	}
	send := c.sendFunc(chID)
	if send == nil {
		send = c.parkFunc(ctx, chID)
	}
	if send == nil {
		if *m != nil {
			c.forget(chID, (*m).Files)
		}
		return false, ErrNoChannel
	}
	if *m == nil {
		msg := imv2.ChatMessage{MessageID: id, Text: ev.Text}
		for _, f := range ev.Files {
			file, err := c.offer(ctx, chID, f)
			if err != nil {
				c.forget(chID, msg.Files)
				return false, fmt.Errorf("offering %q: %w", f.Filename, err)
			}
			msg.Files = append(msg.Files, file)
		}
		*m = &msg
	}
	if _, err := send(ctx, chID, **m); err != nil {
		if errors.Is(err, &imv2.Error{Code: imv2.CodePendingFull}) {
			return true, err
		}
		c.forget(chID, (*m).Files)
		return false, err
	}
	if err := c.store.Record(ctx, chID, id, imv2.FingerprintOf(*m)); err != nil {
		// Pending now, so a replay is still skipped until the ack; after
		// it a replay would be offered again (xAgent answers it).
		c.log.Warn("connector: inbound event not recorded; a replay after its ack is sent again", "connector_channel_id", chID, "message_id", id, "err", err)
	}
	return false, nil
}

// pause waits d on the kit's clock, or until ctx ends or the Connector
// is closed.
func (c *Connector) pause(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing:
		return imv2.ErrClosed
	}
}

// roomWait counts the Receives waiting for room in channel chID's pending
// store (d +1 or -1): the first to wait logs that the channel's user
// messages wait, the last to stop logs whether room freed (took) or the
// callers gave up. The map holds only channels with a waiter.
func (c *Connector) roomWait(chID string, d int, took bool) {
	c.roomMu.Lock()
	defer c.roomMu.Unlock()
	n := c.roomWaits[chID] + d
	switch {
	case d > 0 && n == 1:
		c.log.Warn("connector: the channel's pending store is full (xAgent acks nothing); user messages wait for room", "connector_channel_id", chID)
	case n == 0 && took:
		c.log.Info("connector: the channel's pending store has room again; user messages are handed to xAgent", "connector_channel_id", chID)
	case n == 0:
		c.log.Info("connector: user messages stopped waiting for room in the channel's pending store (their context ended)", "connector_channel_id", chID)
	}
	if n == 0 {
		delete(c.roomWaits, chID)
	} else {
		c.roomWaits[chID] = n
	}
}

// received reports whether message id was handed to channel chID before:
// recorded as handed over, or still pending.
func (c *Connector) received(ctx context.Context, chID, id string) (bool, error) {
	if _, ok, err := c.store.Lookup(ctx, chID, id); err != nil || ok {
		return ok, err
	}
	pending, err := c.store.List(ctx, chID)
	if err != nil {
		return false, err
	}
	for _, e := range pending {
		if e.Message.MessageID == id {
			return true, nil
		}
	}
	return false, nil
}

// sendFunc is how a user message reaches channel chID: the Relay, or the
// Channel open here; nil when neither can.
func (c *Connector) sendFunc(chID string) func(context.Context, string, imv2.ChatMessage) (string, error) {
	if c.relay != nil {
		return c.relay.Send
	}
	ch := c.server.Channel(chID)
	if ch == nil {
		return nil
	}
	return func(ctx context.Context, _ string, m imv2.ChatMessage) (string, error) { return ch.Send(ctx, m) }
}

// forget deletes the files offered for a message that was not sent.
func (c *Connector) forget(chID string, files []imv2.File) {
	for _, f := range files {
		if err := c.handler.Files().Delete(context.Background(), chID, f.FileRef); err != nil {
			c.log.Warn("connector: offered file not deleted", "file_ref", f.FileRef, "err", err)
		}
	}
}

func (c *Connector) offer(ctx context.Context, channelID string, f InboundFile) (imv2.File, error) {
	if f.Open == nil {
		return imv2.File{}, errors.New("InboundFile.Open is nil")
	}
	rc, err := f.Open()
	if err != nil {
		return imv2.File{}, err
	}
	defer rc.Close()
	return c.handler.OfferFile(ctx, channelID, f.Filename, f.MimeType, rc)
}

// A bound channel that is not open here — not reopened since a restart,
// whose registry cannot list the IDs it knows, so no offline grace runs
// for it — still takes an event: its user message is added to the
// channel's durable pending store, which the Channel lists when xAgent
// reopens it and sends from (S10). A timer of one offline grace, started
// by the first parked message, fails what the store still holds for the
// channel if it was not reopened by then: removed, its files deleted,
// reported to Options.Advanced.Channel.OnFailed with code expired and
// logged. Never a Receive that fails for ever with ErrNoChannel. A
// restart before the grace ends starts the timer again at the next
// parked message.

// parking holds the grace timers of channels with parked messages.
type parking struct {
	clock    clock.Clock
	grace    time.Duration
	onFailed func(channelID string, m imv2.ChatMessage, err *imv2.Error)

	mu     sync.Mutex
	closed bool
	timers map[string]clock.Timer // by channel
}

func newParking(clk clock.Clock, grace time.Duration, onFailed func(string, imv2.ChatMessage, *imv2.Error)) *parking {
	return &parking{clock: clk, grace: grace, onFailed: onFailed, timers: map[string]clock.Timer{}}
}

// close stops every grace timer; parked messages stay in the store.
func (p *parking) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, t := range p.timers {
		t.Stop()
		delete(p.timers, id)
	}
}

// parkFunc returns how a user message is kept for channel chID, bound and
// registered but not open here, until xAgent reopens it; nil when the
// registry does not know the channel (or cannot say).
func (c *Connector) parkFunc(ctx context.Context, chID string) func(context.Context, string, imv2.ChatMessage) (string, error) {
	if known, err := c.store.Known(ctx, chID); err != nil || !known {
		return nil
	}
	return c.park
}

// park adds m to channel chID's pending store and starts the channel's
// grace timer if none runs.
func (c *Connector) park(ctx context.Context, chID string, m imv2.ChatMessage) (string, error) {
	if err := m.Validate(imv2.ToXAgent); err != nil {
		return "", err
	}
	if err := c.store.Add(ctx, imv2.PendingEntry{ChannelID: chID, Message: m, Created: c.clock.Now()}); err != nil {
		return "", err
	}
	// The channel may have opened since sendFunc looked, after its Channel
	// listed the store: have it take the entry (a no-op if it has it).
	if ch := c.server.Channel(chID); ch != nil {
		if _, err := ch.AdoptPending(ctx); err != nil && !errors.Is(err, imv2.ErrClosed) {
			c.log.Warn("connector: a channel opened meanwhile did not take a parked message; it sends it at its next open", "connector_channel_id", chID, "err", err)
		}
		return m.MessageID, nil
	}
	c.log.Info("connector: bound channel not open here; the user message is kept until xAgent reopens it", "connector_channel_id", chID, "message_id", m.MessageID, "grace", c.parked.grace)
	p := c.parked
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && p.timers[chID] == nil {
		p.timers[chID] = p.clock.AfterFunc(p.grace, func() { c.parkedGraceOver(chID) })
	}
	return m.MessageID, nil
}

// parkedGraceOver fails what channel chID's pending store holds when the
// channel was not reopened within the grace.
func (c *Connector) parkedGraceOver(chID string) {
	p := c.parked
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	delete(p.timers, chID)
	p.mu.Unlock()
	if c.server.Channel(chID) != nil {
		return // reopened: its Channel sends them, with its own expiry
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.callTimeout)
	defer cancel()
	entries, err := c.store.List(ctx, chID)
	if err != nil {
		c.log.Warn("connector: parked messages of a channel not reopened not listed; they stay until it opens", "connector_channel_id", chID, "err", err)
		return
	}
	for _, e := range entries {
		if err := c.store.Remove(ctx, chID, e.Message.MessageID); err != nil {
			c.log.Warn("connector: parked message not removed", "connector_channel_id", chID, "message_id", e.Message.MessageID, "err", err)
			continue
		}
		c.forget(chID, e.Message.Files)
		fail := &imv2.Error{Code: imv2.CodeExpired, Message: fmt.Sprintf("channel %s was not reopened by xAgent within the offline grace (%v); the user message was not delivered", chID, p.grace)}
		c.log.Warn("connector: user message failed: "+fail.Message, "connector_channel_id", chID, "message_id", e.Message.MessageID)
		if p.onFailed != nil {
			p.onFailed(chID, e.Message, fail)
		}
	}
}
