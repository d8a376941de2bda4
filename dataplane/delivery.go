package dataplane

import (
	"context"
	"errors"
	"sync"

	"github.com/xagentkit/imv2"
)

// Delivery is the handle of one final the Client sent (Client.Send,
// Reply.Final): Wait reports its terminal outcome, the same one the
// client-wide Options.OnDelivered and OnFailed callbacks are told.
type Delivery struct {
	messageID string
	done      chan struct{}
	// Guarded by deliveries.mu while the handle is registered: the
	// channel it is keyed under, the sends of it in flight, and whether
	// one of them succeeded (then the final is pending and the handle
	// stays until its outcome).
	at      string
	sending int
	sent    bool
	// Set before done is closed.
	channelID string
	status    imv2.AckStatus
	err       error
}

// MessageID returns the final's message_id.
func (d *Delivery) MessageID() string { return d.messageID }

// Done is closed when the outcome is known (or the Client closed).
func (d *Delivery) Done() <-chan struct{} { return d.done }

// Wait blocks until the final's terminal outcome and returns it:
// imv2.AckAccepted or imv2.AckDuplicate with a nil error once the
// Connector took it (S1); imv2.AckRejected with the *imv2.Error of a
// rejection with retryable=false or of the pending TTL's expiry (S3).
// Retryable rejections are not outcomes: the final is resent meanwhile
// (A7). When the Client closes first it returns imv2.ErrClosed (the final
// stays in the pending store), when ctx ends first ctx.Err().
//
// The handle is resolved before the client-wide callback of the same
// outcome is called, so Wait may return while OnDelivered or OnFailed
// still runs (and a callback may Wait on its own message without a
// deadlock): code that needs a callback's effect waits for the callback.
func (d *Delivery) Wait(ctx context.Context) (imv2.AckStatus, error) {
	select {
	case <-d.done:
		return d.status, d.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// ChannelID returns the channel the outcome came from, once Done: the
// channel the final was sent on, or the one it was handed over to when
// the Connector replaced a forgotten channel (S2).
func (d *Delivery) ChannelID() string {
	select {
	case <-d.done:
		return d.channelID
	default:
		return ""
	}
}

// deliveryKey names a final: message IDs are unique per channel.
type deliveryKey struct{ channel, message string }

// deliveries are the open Delivery handles of a Client. One lives from
// its send until the outcome, so they are bounded by the pending store
// (Options.Pending caps what may be pending) and all end at Close.
type deliveries struct {
	mu     sync.Mutex
	open   map[deliveryKey]*Delivery
	closed bool
}

// add returns the handle of a final about to be sent and counts the send
// as in flight until finish. Sends of a message_id already registered
// share its handle: a resend while pending, or a concurrent Send of the
// same final.
func (ds *deliveries) add(channelID, messageID string) *Delivery {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	k := deliveryKey{channelID, messageID}
	if d := ds.open[k]; d != nil {
		d.sending++
		return d
	}
	d := &Delivery{messageID: messageID, done: make(chan struct{})}
	if ds.closed {
		d.err = imv2.ErrClosed
		close(d.done)
		return d
	}
	if ds.open == nil {
		ds.open = map[deliveryKey]*Delivery{}
	}
	d.at, d.sending = channelID, 1
	ds.open[k] = d
	return d
}

// finish ends a send add counted. The handle is forgotten only when no
// send of it is still in flight and none succeeded, so nothing is pending
// and no caller holds it: a failed send must not take away the handle of
// a concurrent one that succeeded or may still succeed.
func (ds *deliveries) finish(d *Delivery, sent bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	k := deliveryKey{d.at, d.messageID}
	if ds.open[k] != d {
		return // resolved, closed, or never registered
	}
	d.sending--
	d.sent = d.sent || sent
	if d.sending == 0 && !d.sent {
		delete(ds.open, k)
	}
}

// move re-keys the handle of a final handed over to another channel.
func (ds *deliveries) move(from, to, messageID string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d := ds.open[deliveryKey{from, messageID}]
	if d == nil {
		return
	}
	delete(ds.open, deliveryKey{from, messageID})
	d.at = to
	ds.open[deliveryKey{to, messageID}] = d
}

// resolve ends the handle of a final with its outcome, if one is open.
func (ds *deliveries) resolve(channelID, messageID string, status imv2.AckStatus, err error) {
	ds.mu.Lock()
	k := deliveryKey{channelID, messageID}
	d := ds.open[k]
	delete(ds.open, k)
	ds.mu.Unlock()
	if d == nil {
		return
	}
	d.channelID, d.status, d.err = channelID, status, err
	close(d.done)
}

// closeAll ends every open handle with imv2.ErrClosed.
func (ds *deliveries) closeAll() {
	ds.mu.Lock()
	open := ds.open
	ds.open, ds.closed = nil, true
	ds.mu.Unlock()
	for k, d := range open {
		d.channelID, d.err = k.channel, imv2.ErrClosed
		close(d.done)
	}
}

// hookDeliveries makes the Channels' outcome callbacks resolve the handles
// first, then call the ones the caller configured.
func (c *Client) hookDeliveries() {
	delivered, failed := c.opts.OnDelivered, c.opts.OnFailed
	c.opts.OnDelivered = func(channelID string, m imv2.ChatMessage, status imv2.AckStatus) {
		c.deliveries.resolve(channelID, m.MessageID, status, nil)
		c.reassert(channelID, m.MessageID)
		if delivered != nil {
			delivered(channelID, m, status)
		}
	}
	c.opts.OnFailed = func(channelID string, m imv2.ChatMessage, err *imv2.Error) {
		c.deliveries.resolve(channelID, m.MessageID, imv2.AckRejected, err)
		if failed != nil {
			failed(channelID, m, err)
		}
	}
}

// Send sends m as a final on the open channel channelID (an empty
// MessageID is generated) and returns its Delivery. Like imv2.Channel.Send
// it returns once the final is pending: resends after an ack timeout, a
// reconnect or a retryable rejection happen by themselves (S2, A7). An
// error means nothing new is pending (a full queue, a conflicting
// message_id, an unknown channel). A channel the Connector replaced
// (W5) is followed to its successor.
func (c *Client) Send(ctx context.Context, channelID string, m imv2.ChatMessage) (*Delivery, error) {
	if m.MessageID == "" {
		m.MessageID = imv2.NewMessageID()
	}
	for tries := 1; ; tries++ {
		id, ch, err := c.channelFor(channelID)
		if err != nil {
			return nil, err
		}
		d, err := c.track(id, m.MessageID, func() error {
			_, err := ch.Send(ctx, m)
			return err
		})
		if err != nil && tries < maxFollows && c.movedOn(id, err) {
			continue // replaced while sending: try the successor
		}
		return d, err
	}
}

// maxFollows bounds how many replacements one send follows: each needs
// the Connector to replace the channel again while the send runs.
const maxFollows = 4

// movedOn reports whether a send on channel id failed because the
// Connector replaced the channel meanwhile (the old Channel closed by the
// handover), so the send should go to the successor.
func (c *Client) movedOn(id string, err error) bool {
	return errors.Is(err, imv2.ErrClosed) && c.Resolve(id) != id
}

// track registers the handle before send, so an ack that beats send's
// return is not missed, and forgets it when send fails unless another
// send of the same final holds it.
func (c *Client) track(channelID, messageID string, send func() error) (*Delivery, error) {
	d := c.deliveries.add(channelID, messageID)
	err := send()
	c.deliveries.finish(d, err == nil)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Reply is an assistant message of a Client's channel in the making:
// deltas, then the final, whose Delivery reports the outcome. When the
// Connector replaces the channel (W5) an unfinished Reply follows it: the
// next delta starts the new channel's numbering at 1 under the same
// message_id (the Connector never saw the earlier ones there; the final
// carries the whole text anyway, D5), and the final goes to the new
// channel.
type Reply struct {
	c         *Client
	mu        sync.Mutex
	channelID string        // guarded by mu: where the reply goes now
	ch        *imv2.Channel // guarded by mu: that channel's Channel
	r         *imv2.Reply
	shown     bool // guarded by mu: a delta went out, the Connector cleared the activity (C6)
}

// NewReply starts an assistant message on the open channel channelID
// (or the channel that replaced it); an empty messageID is generated.
func (c *Client) NewReply(channelID, messageID string) (*Reply, error) {
	id, ch, err := c.channelFor(channelID)
	if err != nil {
		return nil, err
	}
	return &Reply{c: c, channelID: id, ch: ch, r: ch.NewReply(messageID)}, nil
}

// MessageID returns the message_id every delta and the final carry.
func (r *Reply) MessageID() string { return r.r.MessageID() }

// ChannelID returns the channel the reply goes to now.
func (r *Reply) ChannelID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.channelID
}

// follow moves the reply to the channel that replaced its own, if any;
// r.mu is held.
func (r *Reply) follow() error {
	id, ch, err := r.c.channelFor(r.channelID)
	if err != nil {
		return err
	}
	if id != r.channelID {
		r.channelID, r.ch, r.r = id, ch, ch.NewReply(r.r.MessageID())
	}
	return nil
}

// Delta sends the next piece of text (imv2.Reply.Delta). It is best
// effort: while the connection is down it fails at once with
// connector_channel_unavailable and the text is dropped, not queued; the
// final carries the whole text (D5, package doc).
func (r *Reply) Delta(ctx context.Context, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tries := 1; ; tries++ {
		if err := r.follow(); err != nil {
			return err
		}
		err := r.r.Delta(ctx, text)
		if err != nil && tries < maxFollows && r.c.movedOn(r.channelID, err) {
			continue
		}
		if err == nil && !r.shown {
			r.shown = true
			r.c.activity.clear(r.channelID, r.r.MessageID()) // the first delta clears it (C6)
		}
		return err
	}
}

// Final sends the final message, m's MessageID set to the reply's
// (imv2.Reply.Final), and returns its Delivery.
func (r *Reply) Final(ctx context.Context, m imv2.ChatMessage) (*Delivery, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tries := 1; ; tries++ {
		if err := r.follow(); err != nil {
			return nil, err
		}
		d, err := r.c.track(r.channelID, r.r.MessageID(), func() error { return r.r.Final(ctx, m) })
		if err != nil && tries < maxFollows && r.c.movedOn(r.channelID, err) {
			continue
		}
		if err == nil {
			r.c.activity.clear(r.channelID, r.r.MessageID()) // the final clears it (C6)
		}
		return d, err
	}
}

// Activity sends what the agent is doing for this reply: thinking, a tool
// (with its name, C3) or idle (C1, C2). It is a snapshot, neither acked
// nor retried (a lost one is replaced by the next): while the connection
// is down it fails at once with connector_channel_unavailable and is not
// queued. An error is for the log, never a reason to hold the answer back
// (C8).
//
// The Client remembers the newest snapshot of the channel with the
// reply's message_id until the reply's first delta or its final clears
// it (C6). The Connector clears the status whenever a final arrives, also
// the resent final of the previous answer; when that final's ack comes
// back the Client sends this reply's snapshot again, so the previous
// answer does not clear the next one's "thinking".
func (r *Reply) Activity(ctx context.Context, a imv2.ChatActivity) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.follow(); err != nil {
		return err
	}
	if err := a.Validate(imv2.ToConnector); err != nil {
		return err
	}
	if a.Status == imv2.ActivityIdle {
		r.c.activity.clear(r.channelID, r.r.MessageID())
	} else {
		r.c.activity.set(r.channelID, r.r.MessageID(), a)
	}
	return r.ch.SendActivity(ctx, a)
}

// activities is the newest activity snapshot of each channel, with the
// message_id of the reply it belongs to: at most one entry per channel
// the Client holds (MaxChannels), removed by idle, the reply's first
// delta or its final, and all dropped at Close.
type activities struct {
	mu  sync.Mutex
	now map[string]activityOf
}

type activityOf struct {
	messageID string
	a         imv2.ChatActivity
}

func (as *activities) set(channelID, messageID string, a imv2.ChatActivity) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.now == nil {
		as.now = map[string]activityOf{}
	}
	as.now[channelID] = activityOf{messageID, a}
}

// clear forgets the channel's snapshot if it is messageID's.
func (as *activities) clear(channelID, messageID string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.now[channelID].messageID == messageID {
		delete(as.now, channelID)
	}
}

// move re-keys a channel's snapshot to the channel that replaced it.
func (as *activities) move(from, to string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if cur, ok := as.now[from]; ok {
		delete(as.now, from)
		as.now[to] = cur
	}
}

// other returns the channel's snapshot when it belongs to a reply other
// than messageID.
func (as *activities) other(channelID, messageID string) (imv2.ChatActivity, bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	cur, ok := as.now[channelID]
	return cur.a, ok && cur.messageID != messageID
}

// reassert sends the channel's snapshot again after the final messageID
// was acked, if the snapshot is another reply's: the final's arrival
// cleared it at the Connector (C6). Off the channel's goroutine, as a
// write may wait; bounded by the acks, and ended by Close.
func (c *Client) reassert(channelID, messageID string) {
	a, ok := c.activity.other(channelID, messageID)
	if !ok {
		return
	}
	c.mu.Lock()
	if c.closed { // Close waits for c.wg: no Add once it may be waiting
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		if _, ch, err := c.channelFor(channelID); err == nil {
			_ = ch.SendActivity(c.ctx, a)
		}
	}()
}
