package matrixbridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/xfiles"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Bounds of the inbound side: TimelineLimit is the timeline limit of the
// /sync filter; a batch that says "limited" is completed from /messages,
// up to MaxGapEvents.
const (
	TimelineLimit = 50
	MaxGapEvents  = 500
)

// MessageID is the message_id of the user message a Matrix event becomes:
// the kit's connector.EventMessageID of room and event (I4, M2), so a
// /sync replayed after a restart is a duplicate, never a second message.
func MessageID(roomID, eventID string) string { return connector.EventMessageID(roomID, eventID) }

// Listen implements connector.Listener: the kit runs it for each bound
// channel while xAgent has it open. It reads the room with /sync until ctx
// ends, handing each new m.room.message from another user to in.Receive
// with the room as conversation and the Matrix event ID. Media (m.image,
// m.video, m.audio, m.file) is downloaded and attached for the kit to
// offer (M6). The /sync position is saved in the binding's Account after a
// batch was received whole, so a crash replays at most one batch, which
// the kit deduplicates; any failure returns, and the kit calls Listen
// again after a backoff. Skipped: the bot's own events, edits, redacted
// events, encrypted media and non-message events. A token that stopped
// working expires the binding (connector.ErrBindingExpired); the bot
// leaving or being removed from the room revokes it
// (connector.ErrBindingRevoked).
func (br *Bridge) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	acc, err := AccountOf(b.Data)
	if err != nil {
		return err
	}
	cli, room := br.client(acc), id.RoomID(b.Key)
	for ctx.Err() == nil {
		resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{Timeout: int(br.cfg.SyncTimeout.Milliseconds()), Since: acc.Since, FilterID: roomFilter(room)})
		if err = classify("sync", err); isAuthGone(err) {
			return fmt.Errorf("%w: %w", connector.ErrBindingExpired, err)
		} else if err != nil {
			return err
		}
		if _, left := resp.Rooms.Leave[room]; left && acc.Since != "" {
			return fmt.Errorf("%w: the bot left the room", connector.ErrBindingRevoked)
		}
		if jr := resp.Rooms.Join[room]; jr != nil && acc.Since != "" { // no Since: take the position, skip history
			events := jr.Timeline.Events
			if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
				gap, err := br.fillGap(ctx, cli, room, acc.Since, jr.Timeline.PrevBatch)
				if err != nil {
					return err
				}
				events = append(gap, events...)
			}
			for _, evt := range events {
				ev, ok, err := br.convert(ctx, cli, acc, b.Key, evt)
				if err == nil && ok {
					err = in.Receive(ctx, ev)
				}
				if err != nil && !errors.Is(err, &imv2.Error{Code: imv2.CodeMessageIDConflict}) {
					return err // the batch is received again; the kit deduplicates
				}
			}
		}
		if acc.Since != resp.NextBatch {
			acc.Since = resp.NextBatch
			if err := in.Update(ctx, func(b *state.Binding) error { b.Data = acc.Data(); return nil }); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
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

// fillGap fetches the events between since and the start of a limited
// timeline, oldest first, at most MaxGapEvents.
func (br *Bridge) fillGap(ctx context.Context, cli *mautrix.Client, room id.RoomID, since, from string) ([]*event.Event, error) {
	var out []*event.Event
	for len(out) < MaxGapEvents {
		resp, err := cli.Messages(ctx, room, from, since, mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
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
		br.log.Warn("matrixbridge: more messages were missed than MaxGapEvents; older ones skipped")
		out = out[:MaxGapEvents]
	}
	slices.Reverse(out)
	return out, nil
}

// convert makes a connector.InboundEvent of a user's m.room.message; ok is false
// for an event that is not forwarded. The bot's own leave or ban is
// connector.ErrBindingRevoked.
func (br *Bridge) convert(ctx context.Context, cli *mautrix.Client, acc Account, room string, evt *event.Event) (connector.InboundEvent, bool, error) {
	if evt.Type == event.StateMember && evt.StateKey != nil && *evt.StateKey == acc.UserID {
		if evt.Content.ParseRaw(evt.Type) == nil && slices.Contains([]event.Membership{event.MembershipLeave, event.MembershipBan}, evt.Content.AsMember().Membership) {
			return connector.InboundEvent{}, false, fmt.Errorf("%w: the bot was removed from the room", connector.ErrBindingRevoked)
		}
		return connector.InboundEvent{}, false, nil
	}
	if evt.Type != event.EventMessage || evt.Sender.String() == acc.UserID || evt.Unsigned.RedactedBecause != nil || evt.Content.ParseRaw(evt.Type) != nil {
		return connector.InboundEvent{}, false, nil
	}
	c := evt.Content.AsMessage()
	if c.RelatesTo != nil && c.RelatesTo.GetReplaceID() != "" {
		return connector.InboundEvent{}, false, nil // an edit: the profile has no edit
	}
	ev := connector.InboundEvent{Conversation: room, EventID: evt.ID.String(), Text: c.Body}
	if _, media := fileTypes[c.MsgType]; !media {
		return ev, ev.Text != "", nil
	}
	name := cmp.Or(c.FileName, c.Body)
	if c.Body == name {
		ev.Text = "" // no caption (Matrix v1.10 media captions)
	}
	data, mime, err := br.download(ctx, acc, c)
	switch {
	case err != nil && imv2.SafeToRetry(err):
		return connector.InboundEvent{}, false, err
	case err != nil:
		br.log.Info("matrixbridge: media not downloadable; forwarded without it", "room", room, "err", err)
		ev.Text = cmp.Or(ev.Text, c.Body) // forward its name
	default:
		ev.Files = []connector.InboundFile{{Filename: name, MimeType: mime, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}}
	}
	return ev, ev.Text != "" || ev.Files != nil, nil
}

// hostPort is u's host:port as a transport dials it.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// fileTypes are the msgtypes that carry a file.
var fileTypes = map[event.MessageType]bool{event.MsgImage: true, event.MsgVideo: true, event.MsgAudio: true, event.MsgFile: true}

// download GETs a media event's content, at most connector.DefaultMaxFileBytes,
// with the authenticated endpoint (Matrix v1.11) or else the legacy
// /_matrix/media/v3/download. A permanent error means the media cannot be
// had (encrypted, gone, too large).
//
// The homeserver is the one a sign-in named: the request goes through
// xfiles' guard (Config.PrivateHomeservers), and a refusal is permanent.
func (br *Bridge) download(ctx context.Context, acc Account, c *event.MessageEventContent) ([]byte, string, error) {
	mxc, err := c.URL.Parse()
	if c.URL == "" || err != nil {
		return nil, "", imv2.Refused(errors.New("encrypted or URL-less media"))
	}
	var trusted []string
	if hs, err := url.Parse(acc.Homeserver); err == nil && br.cfg.PrivateHomeservers {
		trusted = append(trusted, hostPort(hs))
	}
	guarded, err := xfiles.GuardedClient(br.http, trusted...)
	if err != nil {
		return nil, "", imv2.Refused(err)
	}
	defer guarded.CloseIdleConnections()
	cli := br.client(acc)
	cli.Client = guarded
	resp, err := cli.Download(ctx, mxc)
	if errors.Is(err, xfiles.ErrRefusedURL) {
		return nil, "", imv2.Refused(err)
	}
	if st := statusOf(classify("", err)); err != nil && (st == http.StatusNotFound || st == http.StatusMethodNotAllowed || st == http.StatusBadRequest) {
		_, resp, err = cli.MakeFullRequestWithResp(ctx, mautrix.FullRequest{Method: http.MethodGet, DontReadResponse: true,
			URL: cli.BuildURL(mautrix.MediaURLPath{"v3", "download", mxc.Homeserver, mxc.FileID})})
	}
	if errors.Is(err, xfiles.ErrRefusedURL) {
		return nil, "", imv2.Refused(err)
	} else if err != nil {
		return nil, "", classify("download media", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, connector.DefaultMaxFileBytes+1))
	if err != nil {
		return nil, "", imv2.NotPosted(err)
	} else if len(data) > connector.DefaultMaxFileBytes {
		return nil, "", imv2.Refused(errors.New("media larger than the file limit"))
	}
	mime := resp.Header.Get("Content-Type")
	if c.Info != nil && c.Info.MimeType != "" {
		mime = c.Info.MimeType
	}
	return data, mime, nil
}
