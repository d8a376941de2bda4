package dataplane

import (
	"context"
	"errors"
	"slices"

	"github.com/xagentkit/imv2"
)

// ErrChannelReplaced is the cause (errors.Is) of a failure that cannot
// follow a channel the Connector replaced with a new ID (W5): a final
// handed over that the new channel refused, or a channel whose successor
// is itself gone. The *imv2.Error around it carries channel_not_open and
// names both IDs; ClientConfig.OnChannelReplaced tells the application
// the pair as soon as the replacement happens.
var ErrChannelReplaced = errors.New("dataplane: the Connector replaced the channel")

// notifyLocked wakes every WaitOpen; c.mu is held.
func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// recordReplacedLocked maps old to its successor id; c.mu is held. The
// map keeps at most MaxChannels entries, the oldest forgotten first. The
// caller has made id live (forgetReplacedLocked) first, so id has no
// successor and no chain can loop back: an edge old → id only ever
// points at the end of a chain.
func (c *Client) recordReplacedLocked(old, id string) {
	if _, ok := c.replaced[old]; !ok {
		c.replacedOrder = append(c.replacedOrder, old)
	}
	c.replaced[old] = id
	for len(c.replacedOrder) > c.cfg.Advanced.MaxChannels {
		delete(c.replaced, c.replacedOrder[0])
		c.replacedOrder = c.replacedOrder[1:]
	}
	if len(c.replacedOrder) < cap(c.replacedOrder)/4 {
		c.replacedOrder = slices.Clip(c.replacedOrder) // let the dropped head go
	}
}

// forgetReplacedLocked drops id's mapping, if any: the ID is live again
// (the Connector handed it out once more). c.mu is held.
func (c *Client) forgetReplacedLocked(id string) {
	if _, ok := c.replaced[id]; !ok {
		return
	}
	delete(c.replaced, id)
	c.replacedOrder = slices.DeleteFunc(c.replacedOrder, func(s string) bool { return s == id })
}

// resolveLocked follows id through the replacements to the channel that
// holds its conversation now; c.mu is held. The chain is bounded by the
// map's size, so even a corrupt cycle ends.
func (c *Client) resolveLocked(id string) string {
	for range len(c.replaced) {
		next, ok := c.replaced[id]
		if !ok {
			break
		}
		id = next
	}
	return id
}

// Resolve returns the channel ID that id stands for now: id itself, or,
// when the Connector replaced it (W5), its successor. Sends, Replies,
// uploads and WaitOpen resolve by themselves; Resolve is for the
// application's own records.
func (c *Client) Resolve(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resolveLocked(id)
}

// WaitOpen blocks until channel id (or the channel that replaced it) is
// open on a live connection, and returns that channel's ID. Connected
// turns true when the hello completes, before the channels are reopened;
// WaitOpen is the wait for the channel itself. It returns an error when
// ctx ends, the Client stops (Err), or the channel is neither held nor
// stored (never opened, or closed with CloseChannel).
func (c *Client) WaitOpen(ctx context.Context, id string) (string, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return "", imv2.ErrClosed
		}
		cur := c.resolveLocked(id)
		e := c.channels[cur]
		if e != nil && e.conn != nil && e.conn == c.conn {
			c.mu.Unlock()
			return cur, nil
		}
		gone := e != nil && e.closed
		changed := c.changed
		c.mu.Unlock()
		if gone {
			return "", imv2.Errorf(imv2.CodeChannelNotOpen, "dataplane: channel %q was closed", cur)
		}
		if e == nil {
			// Held by no Channel: wait only for a stored ID, one a
			// reconnect will reopen.
			ids, err := c.cfg.Store.ChannelIDs(ctx)
			if err != nil {
				return "", err
			}
			if !slices.Contains(ids, cur) {
				return "", imv2.Errorf(imv2.CodeChannelNotOpen, "dataplane: channel %q is neither open nor stored", cur)
			}
		}
		select {
		case <-changed:
		case <-c.done:
			if err := c.Err(); err != nil {
				return "", err
			}
			return "", imv2.ErrClosed
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// channelFor returns the Channel that id stands for now.
func (c *Client) channelFor(id string) (string, *imv2.Channel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.resolveLocked(id)
	if e := c.channels[cur]; e != nil {
		return cur, e.ch, nil
	}
	if cur != id {
		return cur, nil, replacedErr(id, cur)
	}
	return id, nil, imv2.Errorf(imv2.CodeChannelNotOpen, "dataplane: channel %q is not open", id)
}

func replacedErr(old, cur string) *imv2.Error {
	return imv2.Errorf(imv2.CodeChannelNotOpen, "channel %q was replaced by %q, which is gone: %w", old, cur, ErrChannelReplaced)
}
