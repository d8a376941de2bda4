package connector

import (
	"context"
	"errors"
	"time"

	"github.com/xagentkit/imv2/state"
)

// Listener is a Platform that reads each bound conversation itself (a long
// poll, a websocket, a Matrix /sync loop). The kit runs Listen in a
// goroutine of its own for every connected binding whose channel is open —
// when xAgent opens or reopens the channel (after a restart too), and right
// after a sign-in or Bind — at most one per channel. Its context ends when
// the binding goes (Unbind, auth.logout, the channel's drop), expires or is
// revoked, the channel is closed (channel.close), or the Connector closes;
// Close waits for it. A closed channel's reader starts again when xAgent
// reopens it, from the cursor it kept in the binding's Data: a platform
// that keeps history hands over then what came while it was closed, one
// that keeps none (a gateway websocket) does not (W6). A reader per
// channel ever opened would otherwise run for good: xAgent's churn of
// opens and closes left thousands of Listen calls running. A connection
// that drops without channel.close leaves its channels, and their
// readers, for the offline grace (Options.Advanced.OfflineGrace): what a
// reader hands over meanwhile waits in the pending store and reaches
// xAgent when it reconnects, which a platform without history would lose
// to a reader stopped at the drop. This costs no more readers than
// connected peers may hold (one per channel, within the Server's channel
// caps), and the grace's end drops the channels and stops them.
//
// Listen hands what it reads to in.Receive and keeps its cursor in the
// binding's Data with in.Update. A new binding starts at the present:
// what was said in the conversation before it was made is history, and
// history is never handed over (P7, K10: xAgent keeps its own). So a
// Listener that keeps a cursor is also a Starter, whose Start gives a new
// binding its first Data — the cursor of the conversation now — before
// the channel.open that made it is answered (or Bind returns), so that
// nothing a user types after that is missed. A Listener given a binding
// with no Data (a Start that returned none, or no Starter) must read only
// what arrives from then on. Returning an error matching
// ErrBindingExpired (ErrBindingRevoked) marks the binding expired (revoked)
// and ends the reader; nil ends it too. Any other error is logged and
// Listen is called again, with the binding read afresh, after a backoff from ListenBackoffMin doubling to
// ListenBackoffMax on the kit's clock (reset once a call ran that long).
type Listener interface {
	Listen(ctx context.Context, b state.Binding, in Inbox) error
}

// Starter is a Listener that says where a new binding starts reading.
// The kit calls Start whenever it makes a binding with no Data (a
// channel's default conversation at channel.open, Bind, a sign-in): the
// Data returned (at most state.MaxBindingData bytes) is the binding's
// first, typically the conversation's newest cursor, from which Listen
// reads. An error fails the binding (the channel.open is refused as
// connector_channel_unavailable, Bind fails), as a store error does.
type Starter interface {
	Start(ctx context.Context, key string) (data []byte, err error)
}

// Inbox is what a Listener's reader gets besides its binding.
type Inbox interface {
	// Receive hands an inbound event to the kit (Connector.Receive); a
	// channel of the conversation that is not open here fails it only
	// when no channel took it. Like Connector.Receive it waits while a
	// channel's pending store is full, so a reader that hands its events
	// one after another needs no retry of its own and keeps their order.
	Receive(ctx context.Context, ev InboundEvent) error
	// Update changes the channel's binding (Connector.UpdateBinding): a
	// sync cursor or a refreshed token in its Data.
	Update(ctx context.Context, f func(*state.Binding) error) error
}

// Backoff of a failing Listener: the kit calls Listen again after
// ListenBackoffMin, doubling per failure in a row up to ListenBackoffMax;
// a call that ran ListenBackoffMax or longer starts the count again.
const (
	ListenBackoffMin = time.Second
	ListenBackoffMax = 30 * time.Second
)

// ErrBindingExpired is matched (errors.Is) by a Listener's error that says
// the platform credentials stopped working: the kit marks the binding
// expired (Expire) and does not restart the reader.
var ErrBindingExpired = errors.New("connector: the binding's credentials expired")

// ErrBindingRevoked is matched by a Listener's error that says the
// platform revoked the access (the bot was removed from the conversation):
// the kit marks the binding revoked (Revoke) and does not restart the
// reader.
var ErrBindingRevoked = errors.New("connector: the platform revoked the binding")

// reader is one running Listen of a channel.
type reader struct {
	cancel  context.CancelFunc
	done    chan struct{}
	stopped bool // cancelled; a new reader waits for done
	// again: a listen came while this reader ran, so before it ends for
	// want of a connected binding it reads the binding once more (it
	// may have read before the Bind that asked).
	again bool
}

// inbox is the kit's Inbox for one reader: live is the reader's context,
// of the binding it started with.
type inbox struct {
	c         *Connector
	channelID string
	live      context.Context
	of        state.Binding
}

// Receive is Connector.Receive, except that another channel of the
// conversation not open here (ErrNoChannel: not reopened since a
// restart) fails the event only when no channel took it: a Listener that
// returns Receive's error (as ExampleListener does) would otherwise read
// the same event for ever, and the open channels get nothing after it.
// That channel's own reader reads its conversation once it opens, from
// its own cursor where the platform keeps the history; a stream that
// keeps none (a gateway websocket) gives it nothing of what came while it
// was not open.
func (in inbox) Receive(ctx context.Context, ev InboundEvent) error {
	return in.c.receive(ctx, ev, true)
}

func (in inbox) Update(ctx context.Context, f func(*state.Binding) error) error {
	return in.c.UpdateBinding(ctx, in.channelID, in.guard(f))
}

// guard makes f fail once the reader was stopped. A new binding of the
// channel stops the reader under the channel's lock, which f runs under
// too, so a stale reader never writes its Data or State over the new
// binding. A binding made since by a replica sharing the store (another
// key, or the same key signed in again: another Created) is not stopped
// here, so f also fails when the stored binding is no longer the
// reader's.
func (in inbox) guard(f func(*state.Binding) error) func(*state.Binding) error {
	return func(b *state.Binding) error {
		if err := in.live.Err(); err != nil {
			return err
		}
		if b.Key != in.of.Key || !b.Created.Equal(in.of.Created) {
			return errStaleReader
		}
		return f(b)
	}
}

// errStaleReader refuses an Update of a reader whose binding was replaced.
var errStaleReader = errors.New("connector: the channel was bound again since this reader started")

// listen starts the channel's reader unless one runs. The binding is read
// in the reader's goroutine, so callers on the data plane's path (channel
// open) never wait for the store.
func (c *Connector) listen(channelID string) {
	if c.listener == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.readers[channelID]
	if c.closed {
		return
	}
	if old != nil && !old.stopped {
		old.again = true
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &reader{cancel: cancel, done: make(chan struct{})}
	c.readers[channelID] = r
	c.readWG.Add(1)
	go c.read(ctx, channelID, r, old)
}

// Listening reports whether the kit reads the channel's conversation: a
// Listen of it runs, or is due again after a failure. It is false without
// a Listener, before the channel is opened and once its reader stopped
// (channel closed, binding gone or expired, Close). It says the reader
// runs, not that the platform already delivers to it: a Listener that
// subscribes first knows that moment itself.
func (c *Connector) Listening(channelID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.readers[channelID]
	return r != nil && !r.stopped
}

// stopListening cancels the channel's reader without waiting for it: it
// may be the reader itself that asks (an expiry it noticed).
func (c *Connector) stopListening(channelID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.readers[channelID]; r != nil {
		r.stopped = true
		r.cancel()
	}
}

// channelClosed stops the reader of a channel xAgent closed, unless it
// was opened again meanwhile (on another connection): its reader then
// stays. Under c.mu, so a listen of that reopen comes after and starts a
// reader afresh.
func (c *Connector) channelClosed(channelID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server.IsOpen(channelID) {
		return
	}
	if r := c.readers[channelID]; r != nil {
		r.stopped = true
		r.cancel()
	}
}

// read runs Listen for the channel until it ends for good.
func (c *Connector) read(ctx context.Context, channelID string, r, old *reader) {
	defer func() {
		r.cancel()
		c.mu.Lock()
		if c.readers[channelID] == r {
			delete(c.readers, channelID)
		}
		c.mu.Unlock()
		close(r.done)
		c.readWG.Done()
	}()
	if old != nil { // at most one Listen per channel at any time
		select {
		case <-old.done:
		case <-ctx.Done():
			return
		}
	}
	for fails := 0; ; {
		b, ok, err := c.binding(ctx, channelID)
		if err == nil && (!ok || b.State != state.BindingConnected) {
			if c.readAgain(channelID, r) {
				continue
			}
			return
		}
		started := c.clock.Now()
		if err == nil {
			err = c.listener.Listen(ctx, b, inbox{c, channelID, ctx, b})
		}
		switch {
		case ctx.Err() != nil || err == nil:
			return
		case errors.Is(err, ErrBindingExpired), errors.Is(err, ErrBindingRevoked):
			st := state.BindingExpired
			if errors.Is(err, ErrBindingRevoked) {
				st = state.BindingRevoked
			}
			in := inbox{c, channelID, ctx, b}
			if err := in.Update(context.WithoutCancel(ctx), func(b *state.Binding) error { b.State = st; return nil }); err != nil {
				c.log.Warn("connector: binding state not changed", "connector_channel_id", channelID, "state", st, "err", err)
			}
			return
		}
		if c.clock.Now().Sub(started) >= ListenBackoffMax {
			fails = 0
		}
		fails++
		d := min(ListenBackoffMin<<min(fails-1, 8), ListenBackoffMax)
		c.km.listenerFailures.Inc()
		c.log.Warn("connector: listener failed; restarting", "connector_channel_id", channelID, "err", err, "in", d)
		if sleep(ctx, c.clock, d) != nil {
			return
		}
	}
}

// readAgain reports whether r must read its binding once more (a listen
// came since its last read); if not, r leaves the readers in the same
// step, so the next listen starts a new reader instead of relying on it.
func (c *Connector) readAgain(channelID string, r *reader) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.again && !r.stopped {
		r.again = false
		return true
	}
	if c.readers[channelID] == r {
		delete(c.readers, channelID)
	}
	return false
}

// closeReaders stops every reader and waits for them (Close).
func (c *Connector) closeReaders() {
	c.mu.Lock()
	for _, r := range c.readers {
		r.stopped = true
		r.cancel()
	}
	c.mu.Unlock()
	c.readWG.Wait()
}
