package imv2

import (
	"context"
	"sync"
)

// Reply streams one assistant message from xAgent to a Connector: deltas
// numbered 1, 2, 3 … (D2), then exactly one final with the same message_id
// (M10, M14). It is the engine's, for a bare Channel over a Transport of
// one's own; an agent on the data plane answers with
// dataplane.Client.NewReply, whose Reply also carries activity, follows a
// channel the Connector replaces and reports the final's outcome. Deltas are best effort and carry text only (D7); the final
// carries the whole text and every file, and stays pending until acked.
//
// Each assistant message that becomes stable in a tool loop gets its own
// Reply (M14). A Reply is safe for concurrent use, but deltas are numbered
// in the order Delta is called; its lock is held while a delta is written,
// so do not call the same Reply from Options.OnFailed.
type Reply struct {
	c   *Channel
	id  string
	mu  sync.Mutex
	seq int64
	end bool
}

// NewReply starts an assistant message on an xAgent channel. An empty
// messageID is generated. On the data plane use dataplane.Client.NewReply
// (see Reply).
func (c *Channel) NewReply(messageID string) *Reply {
	if messageID == "" {
		messageID = NewMessageID()
	}
	return &Reply{c: c, id: messageID}
}

// MessageID returns the reply's message_id.
func (r *Reply) MessageID() string { return r.id }

// Delta sends the next piece of text. A delta that fails to leave is not
// resent: the Connector will see a gap, reject the following deltas (D4)
// and still show the whole text when the final arrives (D5, M13).
func (r *Reply) Delta(ctx context.Context, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.end {
		return Errorf(CodeInvalidPacket, "reply %q: delta after the final (D6)", r.id)
	}
	if !r.c.neg.Load().Allows(TypeChatMessageDelta, ToConnector) || r.c.role != RoleXAgent {
		return Errorf(CodeUnsupportedPacket, "chat.message.delta is not negotiated outbound on channel %q", r.c.id)
	}
	p, err := NewChatMessageDelta(r.c.id, ChatMessageDelta{MessageID: r.id, Sequence: r.seq + 1, Text: text})
	if err != nil {
		return err
	}
	r.seq++
	return r.c.send(ctx, p)
}

// Final sends the final message: m's MessageID is set to the reply's. After
// Final, Delta fails. The final goes through Send: pending until acked.
func (r *Reply) Final(ctx context.Context, m ChatMessage) error {
	r.mu.Lock()
	if r.end {
		r.mu.Unlock()
		return Errorf(CodeInvalidPacket, "reply %q: final sent twice (M10)", r.id)
	}
	if r.c.role != RoleXAgent {
		r.mu.Unlock()
		return Errorf(CodeUnsupportedPacket, "reply %q: finals are sent by xAgent channels only (M1)", r.id)
	}
	m.MessageID = r.id
	if _, err := r.c.Send(ctx, m); err != nil {
		r.mu.Unlock()
		return err
	}
	r.end = true
	r.mu.Unlock()
	return nil
}

// SendActivity sends a chat.activity snapshot from xAgent (C1). It is not
// acked or retried: the next snapshot replaces it anyway.
func (c *Channel) SendActivity(ctx context.Context, a ChatActivity) error {
	if c.role != RoleXAgent || !c.neg.Load().Allows(TypeChatActivity, ToConnector) {
		return Errorf(CodeUnsupportedPacket, "chat.activity is not negotiated outbound on channel %q", c.id)
	}
	p, err := newChatActivity(c.id, a)
	if err != nil {
		return err
	}
	return c.send(ctx, p)
}

// Project offers an internal xAgent payload of kind to the wire (P7).
// Only kinds the negotiated catalog entries list are projected; every
// other kind — session sync, history snapshots, replays, UI projections,
// any kind added later — is dropped and Project reports false. payload is
// a *ChatMessage for a final, a *ChatMessageDelta for a delta (the caller
// numbers it; prefer Reply) or a *ChatActivity.
func (c *Channel) Project(ctx context.Context, kind string, payload any) (bool, error) {
	typ, ok := c.neg.Load().projection(kind)
	if !ok || c.role != RoleXAgent {
		c.observe(Event{Kind: EventDropped, PacketType: kind})
		return false, nil
	}
	var err error
	switch v := payload.(type) {
	case *ChatMessage:
		if typ != TypeChatMessage {
			break
		}
		_, err = c.Send(ctx, *v)
		return err == nil, err
	case *ChatMessageDelta:
		if typ != TypeChatMessageDelta {
			break
		}
		p, err := NewChatMessageDelta(c.id, *v)
		if err != nil {
			return false, err
		}
		err = c.send(ctx, p)
		return err == nil, err
	case *ChatActivity:
		if typ != TypeChatActivity {
			break
		}
		err = c.SendActivity(ctx, *v)
		return err == nil, err
	}
	return false, Errorf(CodeInvalidPacket, "Project: kind %q needs a payload for %s, got %T", kind, typ, payload)
}
