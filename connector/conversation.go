package connector

import (
	"context"
	"errors"
	"fmt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// ErrNotBound is matched (errors.Is) by the error of a call that needs a
// channel's binding when it has none.
var ErrNotBound = errors.New("connector: not bound to a conversation")

// created is the Server's OnChannelCreate for a Card without auth
// flows: a channel the Server issued is bound to its default
// conversation before its channel.open is answered (so the ack's
// Descriptor says connected).
func (c *Connector) created(ctx context.Context, channelID string) error {
	return c.bindDefault(ctx, channelID, false)
}

// reopened is the Server's OnChannelReopen for a Card without auth
// flows: a reopen of a channel that has no binding (an explicit Unbind,
// or a drop that unbound it but could not forget its ID) binds the
// default conversation again, since no sign-in could. So an Unbind lasts
// until the channel's next channel.open; a Descriptor push or lookup
// never binds.
func (c *Connector) reopened(ctx context.Context, channelID string) error {
	return c.bindDefault(ctx, channelID, true)
}

// bindDefault binds the channel to its default conversation (only when
// it has no binding, if onlyUnbound). A failure refuses the channel.open
// as connector_channel_unavailable: the packet was fine, the binding
// could not be made (an invalid default key, a store error), and a later
// open may succeed.
func (c *Connector) bindDefault(ctx context.Context, channelID string, onlyUnbound bool) error {
	if onlyUnbound {
		_, ok, err := c.store.Binding(ctx, channelID)
		if err != nil {
			return imv2.Errorf(imv2.CodeChannelUnavailable, "channel %s: binding not read: %v", channelID, err)
		}
		if ok {
			return nil
		}
	}
	if err := c.bind(ctx, state.Binding{ChannelID: channelID, Key: c.defConv(channelID)}); err != nil {
		return imv2.Errorf(imv2.CodeChannelUnavailable, "channel %s: default conversation not bound: %v", channelID, err)
	}
	return nil
}

// binding returns the channel's binding as stored: lookups never make
// one (see reopened).
func (c *Connector) binding(ctx context.Context, channelID string) (state.Binding, bool, error) {
	return c.store.Binding(ctx, channelID)
}

// conversation is where the channel's finals go. A channel without a
// binding, or with an expired one, refuses them for good: a resend cannot
// succeed before a sign-in, which xAgent learns from the Descriptor.
func (c *Connector) conversation(ctx context.Context, channelID string) (Conversation, error) {
	b, ok, err := c.binding(ctx, channelID)
	switch {
	case err != nil:
		return Conversation{}, imv2.NotPosted(err)
	case !ok:
		return Conversation{}, imv2.Refused(fmt.Errorf("channel %s: %w", channelID, ErrNotBound))
	case b.State != state.BindingConnected:
		return Conversation{}, imv2.Refused(fmt.Errorf("channel %s: binding is %s; sign in again", channelID, b.State))
	}
	return Conversation{ChannelID: channelID, Key: b.Key, Target: b.Target, Data: b.Data}, nil
}

// Binding returns the channel's binding, as the store keeps it (its Data
// and Drafts too); found is false without one. For a Card without auth
// flows an open channel has one from each of its channel.opens
// (Options.DefaultConversation) until an explicit Unbind.
func (c *Connector) Binding(ctx context.Context, channelID string) (b state.Binding, found bool, err error) {
	return c.binding(ctx, channelID)
}

// describe is the Server's Describe: the Descriptor's status follows the
// binding (created without one, then connected, expired or revoked).
func (c *Connector) describe(ctx context.Context, channelID string) dataplane.ChannelInfo {
	b, ok, err := c.binding(ctx, channelID)
	if err != nil {
		c.log.Warn("connector: binding not read; describing the channel as created", "connector_channel_id", channelID, "err", err)
	}
	if !ok {
		return dataplane.ChannelInfo{Status: protocol.StatusCreated}
	}
	return dataplane.ChannelInfo{Status: string(b.State), DisplayName: b.Target.DisplayName, AccountHint: b.Target.AccountHint}
}

// Bind binds a channel to a conversation (replacing its binding) and
// pushes the new Descriptor when the channel is open. SignIn flows bind
// through it; call it directly for a binding made outside the data plane.
// ChannelID and Key are required; a zero State is state.BindingConnected.
func (c *Connector) Bind(ctx context.Context, b state.Binding) error {
	if err := c.bind(ctx, b); err != nil {
		return err
	}
	c.push(ctx, b.ChannelID)
	return nil
}

// bind stores b (State and Created defaulted) and releases the key the
// channel was bound to before, if that was its last binding. Only the
// store change and the reader's stop and start run under the channel's
// lock; the platform hears of the change after it (changed).
func (c *Connector) bind(ctx context.Context, b state.Binding) error {
	if b.State == "" {
		b.State = state.BindingConnected
	}
	if b.Created.IsZero() {
		b.Created = c.clock.Now()
	}
	if s, ok := c.listener.(Starter); ok && len(b.Data) == 0 {
		data, err := s.Start(ctx, b.Key)
		if err != nil {
			return fmt.Errorf("connector: Starter.Start: %w", err)
		}
		b.Data = data
	}
	unlock := c.chLocks.lock(b.ChannelID)
	ch, err := c.store.Bind(ctx, b)
	if err != nil {
		unlock()
		return err
	}
	if ch.Had {
		c.stopListening(b.ChannelID) // it reads with the old binding
	}
	if b.State == state.BindingConnected && c.server.IsOpen(b.ChannelID) {
		c.listen(b.ChannelID)
	}
	unlock()
	c.changed(ctx, ch)
	return nil
}

// UpdateBinding changes the channel's binding in place: f gets a copy of
// it, and what f leaves is stored (checked as by state.CheckBinding). It is how
// a platform keeps its Data (a refreshed token, a sync cursor) or turns
// the State. f runs under the kit's lock of that channel, so it is
// serialised with the kit's own Bind, Unbind, Expire, Revoke and drop of
// the channel in this process (replicas sharing a store are not ordered
// by it). The locks are striped (a fixed set shared by all channels), so
// f must not call any of those methods, for any channel: it would wait
// for itself. f runs outside the store's own locks, so it may read the
// store or hand events to Receive. With a Store that is a state.BindingUpdater
// (the SDK's stores are) the write is a compare-and-swap, so replicas
// sharing the store do not undo each other's changes either: when
// another replica changed the binding between the read and the write, f
// runs again on what it left (at most 64 times; then UpdateBinding fails
// with channel_busy, retryable). f may not change ChannelID, Key or
// Created (rebind with Bind): UpdateBinding then fails and stores
// nothing, as it does when f returns an error. The Descriptor is
// pushed only when State or Target changed. Turning the State from
// connected stops the channel's Listener; turning it back to connected
// starts it again when the channel is open. A channel without a binding
// fails with ErrNotBound.
func (c *Connector) UpdateBinding(ctx context.Context, channelID string, f func(*state.Binding) error) error {
	changed, err := c.update(ctx, channelID, f)
	if err != nil {
		return err
	}
	if changed {
		c.push(ctx, channelID)
	}
	return nil
}

// update is UpdateBinding without the push; changed reports whether the
// Descriptor's fields (State, Target) changed.
//
// f runs on a copy read from the store, outside any store lock: it may
// read the store, call Receive or take its time. With a state.BindingUpdater
// the write is a compare-and-swap (the store's step only checks that the
// binding is still the one read, and stores f's result), tried again,
// f included, when another replica changed the binding in between.
func (c *Connector) update(ctx context.Context, channelID string, f func(*state.Binding) error) (changed bool, err error) {
	unlock := c.chLocks.lock(channelID)
	defer unlock()
	u, swaps := c.store.(state.BindingUpdater)
	for try := 1; ; try++ {
		old, ok, err := c.store.Binding(ctx, channelID)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("channel %s: %w", channelID, ErrNotBound)
		}
		b := old.Clone()
		if err := f(&b); err != nil {
			return false, err
		}
		if b.ChannelID != old.ChannelID || b.Key != old.Key || !b.Created.Equal(old.Created) {
			return false, fmt.Errorf("connector: UpdateBinding of channel %s changed its channel ID, key or creation time; rebind with Bind", channelID)
		}
		if !swaps { // ordered by the kit's lock, in this process only
			_, err = c.store.Bind(ctx, b)
		} else {
			var found bool
			_, found, err = u.Update(ctx, channelID, func(cur *state.Binding) error {
				if !cur.Equal(old) {
					return errBindingChanged
				}
				*cur = b.Clone()
				return nil
			})
			if err == nil && !found {
				err = errBindingChanged // unbound meanwhile: the next read says so
			}
			if errors.Is(err, errBindingChanged) {
				if try < maxUpdateTries {
					continue // read again: changed, or gone (ErrNotBound)
				}
				return false, imv2.Errorf(imv2.CodeChannelBusy, "connector: the binding of channel %s changed %d times while UpdateBinding ran; try again", channelID, try)
			}
		}
		if err != nil {
			return false, err
		}
		switch {
		case b.State != state.BindingConnected:
			c.stopListening(channelID) // expired or revoked: nothing to read
		case old.State != state.BindingConnected && c.server.IsOpen(channelID):
			c.listen(channelID) // connected again (a refreshed sign-in): read
		}
		return b.State != old.State || b.Target != old.Target, nil
	}
}

// maxUpdateTries bounds the compare-and-swap rounds of one UpdateBinding
// that other replicas' changes of the same binding can cost. Each lost
// round is another replica's write that went in, so the replicas
// together always progress; one UpdateBinding fails only when other
// replicas wrote the same binding 64 times while it ran.
const maxUpdateTries = 64

// errBindingChanged: the binding is no longer the one UpdateBinding read
// (a store's Update found it changed, or gone).
var errBindingChanged = errors.New("connector: the binding changed meanwhile")

// Expire marks the channel's binding expired (the platform credentials
// ran out): its Descriptor says expired, finals are refused and inbound
// events no longer reach it until it signs in again.
func (c *Connector) Expire(ctx context.Context, channelID string) error {
	return c.setState(ctx, channelID, state.BindingExpired)
}

// Revoke marks the channel's binding revoked (the platform revoked the
// access, e.g. the bot was removed from the conversation): its
// Descriptor says revoked, finals are refused and inbound events no
// longer reach it until it signs in again.
func (c *Connector) Revoke(ctx context.Context, channelID string) error {
	return c.setState(ctx, channelID, state.BindingRevoked)
}

func (c *Connector) setState(ctx context.Context, channelID string, st state.BindingState) error {
	return c.UpdateBinding(ctx, channelID, func(b *state.Binding) error {
		b.State = st
		return nil
	})
}

// Unbind removes the channel's binding (a sign-out) and, when it was the
// last binding of its conversation key, tells a Releaser platform. The
// Descriptor turns created. Unbinding an unbound channel does nothing.
func (c *Connector) Unbind(ctx context.Context, channelID string) error {
	if err := c.unbind(ctx, channelID); err != nil {
		return err
	}
	c.push(ctx, channelID)
	return nil
}

func (c *Connector) unbind(ctx context.Context, channelID string) error {
	unlock := c.chLocks.lock(channelID)
	ch, err := c.store.Unbind(ctx, channelID)
	if err != nil || !ch.Had {
		unlock()
		return err
	}
	c.stopListening(channelID)
	unlock()
	c.changed(ctx, ch)
	return nil
}

// changed tells the platform what a binding change removed: an Unbinder
// the binding that went, then a Releaser the key whose last binding it
// was. It runs after the channel's lock is released, so a slow or hung
// platform call holds up no other channel's change (the locks are
// striped) and no channel.open; each call gets ctx, without its
// cancellation, bounded by the display's CallTimeout (a drop passes
// context.Background()).
func (c *Connector) changed(ctx context.Context, ch state.BindingChange) {
	if !ch.Had {
		return
	}
	c.unbound(ctx, ch.Old)
	if ch.Released {
		c.release(ctx, ch.Old.Key)
	}
}

// unbound tells an Unbinder platform that b went.
func (c *Connector) unbound(ctx context.Context, b state.Binding) {
	u, ok := c.platform.(Unbinder)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
	defer cancel()
	if err := u.Unbound(ctx, b); err != nil {
		c.log.Warn("connector: platform not told of an unbinding", "connector_channel_id", b.ChannelID, "err", err)
	}
}

// release tells a Releaser platform that no channel is bound to key any
// more: the store decided it (state.BindingChange.Released) in the change that
// removed the key's last binding, so it is told once each time.
func (c *Connector) release(ctx context.Context, key string) {
	r, ok := c.platform.(Releaser)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
	defer cancel()
	if err := r.Released(ctx, key); err != nil {
		c.log.Warn("connector: releasing the conversation failed", "err", err)
	}
}

// dropped is the Server's OnChannelDrop: a channel gone for good (offline
// grace over, or evicted) releases its binding. The Server calls it
// before its Registry forgets the channel, and keeps the channel
// registered when it fails, so no binding outlives its channel's ID.
// Its Listener stops whatever the unbind returns: the channel is gone,
// so nothing it reads could be delivered.
func (c *Connector) dropped(channelID string) error {
	if err := c.unbind(context.Background(), channelID); err != nil {
		c.stopListening(channelID)
		c.log.Warn("connector: binding of a dropped channel not removed", "connector_channel_id", channelID, "err", err)
		return err
	}
	return nil
}

// push sends the channel's Descriptor if it is open (W7).
func (c *Connector) push(ctx context.Context, channelID string) {
	if !c.server.IsOpen(channelID) {
		return
	}
	if err := c.server.Push(ctx, channelID); err != nil {
		c.log.Debug("connector: descriptor push failed", "connector_channel_id", channelID, "err", err)
	}
}
