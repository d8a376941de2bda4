package matrixbridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Bounds of the inbound side.
const (
	// TimelineLimit is the timeline limit of the /sync filter; a batch that
	// says "limited" is completed from /messages, up to MaxGapEvents.
	TimelineLimit = 50
	MaxGapEvents  = 500
	// SyncBackoffMin and SyncBackoffMax bound the wait after a failed /sync
	// or hand-over, doubling per failure.
	SyncBackoffMin = time.Second
	SyncBackoffMax = 30 * time.Second
)

// MessageID is the message_id of the user message a Matrix event becomes:
// the kit's connector.EventMessageID of room and event (I4, M2), so a
// /sync replayed after a restart is a duplicate, never a second message.
func MessageID(roomID, eventID string) string { return connector.EventMessageID(roomID, eventID) }

// errGone ends RunSync: the token was revoked or the bot left the room.
var errGone = errors.New("matrixbridge: binding gone")

// RunSync reads the channel's room with /sync until ctx ends, handing each
// new m.room.message from another user to receive (the Bridge passes the
// kit's Connector.Receive) with the room as conversation and the Matrix
// event ID. Media (m.image, m.video, m.audio, m.file) is downloaded and
// attached for the kit to offer (M6). The /sync position is stored after a
// batch was received whole, so a crash replays at most one batch, which
// the kit deduplicates. Skipped: the bot's own events, edits, redacted
// events, encrypted media and non-message events. When the token stops
// working or the bot leaves the room, the binding is marked Expired and
// RunSync returns errGone.
func (br *Bridge) RunSync(ctx context.Context, channelID string, receive func(context.Context, connector.Event) error) error {
	_, cli, err := br.bound(channelID)
	if err != nil {
		return err
	}
	for fails := 0; ctx.Err() == nil; {
		err := br.syncOnce(ctx, cli, channelID, receive)
		if isAuthGone(err) {
			err = br.gone(ctx, channelID)
		}
		if err == nil {
			fails = 0
			continue
		} else if errors.Is(err, errGone) || ctx.Err() != nil {
			return err
		}
		fails++
		d := min(SyncBackoffMin<<min(fails-1, 5), SyncBackoffMax)
		br.log.Warn("matrixbridge: sync failed; retrying", "channel", channelID, "err", err, "in", d)
		done := make(chan struct{})
		t := br.cfg.Clock.AfterFunc(d, func() { close(done) })
		select {
		case <-done:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return ctx.Err()
}

// gone marks the binding expired for the Descriptor (W7).
func (br *Bridge) gone(ctx context.Context, channelID string) error {
	br.log.Warn("matrixbridge: the access token no longer works or the bot left the room", "channel", channelID)
	_ = br.store.update(channelID, func(b *Binding) bool { b.Expired = true; return true })
	if br.kit != nil {
		if err := br.kit.Expire(ctx, channelID); err != nil {
			br.log.Warn("matrixbridge: binding not expired", "channel", channelID, "err", err)
		}
	}
	return errGone
}

// syncOnce runs one /sync, receives its messages and stores the position.
func (br *Bridge) syncOnce(ctx context.Context, cli *mautrix.Client, ch string, receive func(context.Context, connector.Event) error) error {
	b, _, err := br.bound(ch)
	if err != nil {
		return errGone
	}
	resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{Timeout: int(br.cfg.SyncTimeout.Milliseconds()), Since: b.Since, FilterID: roomFilter(id.RoomID(b.RoomID))})
	if err != nil {
		return classify("sync", err)
	}
	room := id.RoomID(b.RoomID)
	if _, left := resp.Rooms.Leave[room]; left && b.Since != "" {
		return br.gone(ctx, ch)
	}
	if jr := resp.Rooms.Join[room]; jr != nil && b.Since != "" { // no Since: take the position, skip history
		events := jr.Timeline.Events
		if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
			gap, err := br.fillGap(ctx, cli, b, jr.Timeline.PrevBatch)
			if err != nil {
				return err
			}
			events = append(gap, events...)
		}
		for _, evt := range events {
			ev, ok, err := br.convert(ctx, cli, b, evt)
			if err == nil && ok {
				err = receive(ctx, ev)
			}
			if err != nil && !errors.Is(err, &imv2.Error{Code: imv2.CodeMessageIDConflict}) {
				return err // the batch is received again; the kit deduplicates
			}
		}
	}
	return br.store.update(ch, func(b *Binding) bool { ok := b.Since != resp.NextBatch; b.Since = resp.NextBatch; return ok })
}

// roomFilter is the /sync filter, inline (a JSON filter in place of a
// filter ID): the room's messages and membership changes only, no
// presence, account data, typing or other rooms.
func roomFilter(room id.RoomID) string {
	none := &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}}
	f, _ := json.Marshal(&mautrix.Filter{AccountData: none, Presence: none, EventFormat: mautrix.EventFormatClient,
		Room: &mautrix.RoomFilter{Rooms: []id.RoomID{room}, IncludeLeave: true, AccountData: none, Ephemeral: none, State: none,
			Timeline: &mautrix.FilterPart{Types: []event.Type{event.EventMessage, event.StateMember}, Limit: TimelineLimit}}})
	return string(f)
}

// fillGap fetches the events between b.Since and the start of a limited
// timeline, oldest first, at most MaxGapEvents.
func (br *Bridge) fillGap(ctx context.Context, cli *mautrix.Client, b Binding, from string) ([]*event.Event, error) {
	var out []*event.Event
	for len(out) < MaxGapEvents {
		resp, err := cli.Messages(ctx, id.RoomID(b.RoomID), from, b.Since, mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
		if err != nil {
			return nil, classify("messages", err)
		}
		out = append(out, resp.Chunk...)
		if len(resp.Chunk) == 0 || resp.End == "" || resp.End == from {
			break
		}
		from = resp.End
	}
	if len(out) >= MaxGapEvents {
		br.log.Warn("matrixbridge: more messages were missed than MaxGapEvents; older ones skipped", "channel", b.ChannelID)
		out = out[:MaxGapEvents]
	}
	slices.Reverse(out)
	return out, nil
}

// convert makes a connector.Event of a user's m.room.message; ok is false
// for an event that is not forwarded.
func (br *Bridge) convert(ctx context.Context, cli *mautrix.Client, b Binding, evt *event.Event) (connector.Event, bool, error) {
	if evt.Type == event.StateMember && evt.StateKey != nil && *evt.StateKey == b.UserID {
		if evt.Content.ParseRaw(evt.Type) == nil && slices.Contains([]event.Membership{event.MembershipLeave, event.MembershipBan}, evt.Content.AsMember().Membership) {
			return connector.Event{}, false, br.gone(ctx, b.ChannelID)
		}
		return connector.Event{}, false, nil
	}
	if evt.Type != event.EventMessage || evt.Sender.String() == b.UserID || evt.Unsigned.RedactedBecause != nil || evt.Content.ParseRaw(evt.Type) != nil {
		return connector.Event{}, false, nil
	}
	c := evt.Content.AsMessage()
	if c.RelatesTo != nil && c.RelatesTo.GetReplaceID() != "" {
		return connector.Event{}, false, nil // an edit: the profile has no edit
	}
	ev := connector.Event{Conversation: b.RoomID, EventID: evt.ID.String(), Text: c.Body}
	if _, media := fileTypes[c.MsgType]; !media {
		return ev, ev.Text != "", nil
	}
	name := cmp.Or(c.FileName, c.Body)
	if c.Body == name {
		ev.Text = "" // no caption (Matrix v1.10 media captions)
	}
	data, mime, err := br.download(ctx, cli, c)
	switch {
	case err != nil && imv2.IsRetryable(err):
		return connector.Event{}, false, err
	case err != nil:
		br.log.Info("matrixbridge: media not downloadable; forwarded without it", "channel", b.ChannelID, "err", err)
		ev.Text = cmp.Or(ev.Text, c.Body) // forward its name
	default:
		ev.Files = []connector.InboundFile{{Filename: name, MimeType: mime, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}}
	}
	return ev, ev.Text != "" || ev.Files != nil, nil
}

// fileTypes are the msgtypes that carry a file.
var fileTypes = map[event.MessageType]bool{event.MsgImage: true, event.MsgVideo: true, event.MsgAudio: true, event.MsgFile: true}

// download GETs a media event's content, at most connector.DefaultMaxFileBytes,
// with the authenticated endpoint (Matrix v1.11) or else the legacy
// /_matrix/media/v3/download. A permanent error means the media cannot be
// had (encrypted, gone, too large).
func (br *Bridge) download(ctx context.Context, cli *mautrix.Client, c *event.MessageEventContent) ([]byte, string, error) {
	mxc, err := c.URL.Parse()
	if c.URL == "" || err != nil {
		return nil, "", imv2.Permanent(errors.New("encrypted or URL-less media"))
	}
	resp, err := cli.Download(ctx, mxc)
	if st := statusOf(classify("", err)); err != nil && (st == http.StatusNotFound || st == http.StatusMethodNotAllowed || st == http.StatusBadRequest) {
		_, resp, err = cli.MakeFullRequestWithResp(ctx, mautrix.FullRequest{Method: http.MethodGet, DontReadResponse: true,
			URL: cli.BuildURL(mautrix.MediaURLPath{"v3", "download", mxc.Homeserver, mxc.FileID})})
	}
	if err != nil {
		return nil, "", classify("download media", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, connector.DefaultMaxFileBytes+1))
	if err != nil {
		return nil, "", imv2.Retryable(err)
	} else if len(data) > connector.DefaultMaxFileBytes {
		return nil, "", imv2.Permanent(errors.New("media larger than the file limit"))
	}
	mime := resp.Header.Get("Content-Type")
	if c.Info != nil && c.Info.MimeType != "" {
		mime = c.Info.MimeType
	}
	return data, mime, nil
}
