package imv2

import "context"

// Drop deletes the channel for good (S7): it closes the channel, removes
// every pending message from the PendingStore and reports each through
// OnFailed with code connector_channel_unavailable (nothing is lost
// silently). Use it when the channel is permanently gone, not on a
// disconnect (SetTransport(nil)) or a channel.close (the state must
// outlive those).
//
// The channel's completed records stay until their TTL or the store's cap
// takes them: the sender may still resend a message the channel completed,
// under the ID that replaces it (CompletedStore.Handover), and it must be
// answered duplicate, not posted twice. CompletedStore.DropChannel
// forgets them at once where that is wanted.
func (c *Channel) Drop(ctx context.Context) error {
	msgs, err := c.takePending(ctx)
	for _, m := range msgs {
		fail := &Error{Code: CodeChannelUnavailable, Message: "the channel was deleted"}
		c.observe(Event{Kind: EventFailed, MessageID: m.MessageID, Code: fail.Code})
		if c.o.OnFailed != nil {
			c.o.OnFailed(c.id, m, fail)
		}
	}
	return err
}

// Handover closes the channel and takes its pending messages out of the
// PendingStore, oldest first, so the caller can Send them on the channel
// that replaces this one (a Connector that answered a reopen with a new
// connector_channel_id). Their message_id and content are kept (S2).
func (c *Channel) Handover(ctx context.Context) ([]ChatMessage, error) {
	return c.takePending(ctx)
}

func (c *Channel) takePending(ctx context.Context) ([]ChatMessage, error) {
	if err := c.Close(); err != nil {
		return nil, err
	}
	entries, err := c.o.Pending.List(ctx, c.id)
	if err != nil {
		return nil, err
	}
	msgs := make([]ChatMessage, 0, len(entries))
	for _, e := range entries {
		if err := c.o.Pending.Remove(ctx, c.id, e.Message.MessageID); err != nil {
			return msgs, err
		}
		msgs = append(msgs, e.Message)
	}
	return msgs, nil
}
