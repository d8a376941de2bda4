package connector

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/xagentkit/imv2"
)

// Event is an inbound platform event of a conversation: what a person
// wrote, and the platform's own ID for it.
type Event struct {
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

// ErrNoChannel is matched by Receive's error when a bound channel has not
// been reopened since a restart: the event is not sent to it, and
// receiving it again later is safe (the message_id is the same).
var ErrNoChannel = errors.New("connector: bound channel is not open since the restart")

// Receive hands an inbound platform event to every channel bound to its
// conversation (connected bindings only), as a user message whose
// message_id is EventMessageID: pending until xAgent acks it, resent as the
// Channel does, and a duplicate — never a second message — when the event
// is received again, also across a restart with a durable Store. It
// returns once the message is pending on every channel; an error names the
// channels it did not reach (ErrNotBound when none is bound).
func (c *Connector) Receive(ctx context.Context, ev Event) error {
	if ev.EventID == "" || len(ev.EventID) > imv2.MaxIDBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "connector: Event.EventID must be 1 to %d bytes", imv2.MaxIDBytes)
	}
	ids, err := c.store.Channels(ctx, ev.Conversation)
	if err != nil {
		return err
	}
	id := EventMessageID(ev.Conversation, ev.EventID)
	var errs []error
	sent := 0
	for _, chID := range ids {
		b, ok, err := c.store.Binding(ctx, chID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok || b.State != BindingConnected {
			continue
		}
		ch := c.server.Channel(chID)
		if ch == nil {
			errs = append(errs, fmt.Errorf("channel %s: %w", chID, ErrNoChannel))
			continue
		}
		m := imv2.ChatMessage{MessageID: id, Text: ev.Text}
		for _, f := range ev.Files {
			file, err := c.offer(ctx, chID, f)
			if err != nil {
				return fmt.Errorf("connector: offering %q: %w", f.Filename, err)
			}
			m.Files = append(m.Files, file)
		}
		if _, err := ch.Send(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("channel %s: %w", chID, err))
			continue
		}
		sent++
	}
	if sent == 0 && len(errs) == 0 {
		return fmt.Errorf("conversation %q: %w", ev.Conversation, ErrNotBound)
	}
	return errors.Join(errs...)
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
