package matrixbridge

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Bounds of the inbound side.
const (
	// TimelineLimit is the timeline limit of the /sync filter: at most
	// this many events per room and batch. A batch that says "limited"
	// (more happened since the last sync) is completed from /messages.
	TimelineLimit = 50
	// MaxGapEvents bounds the events fetched from /messages to fill one
	// limited batch; older ones are skipped and logged.
	MaxGapEvents = 500
	// SyncBackoffMin and SyncBackoffMax bound the wait after a failed
	// /sync or a failed hand-over, doubling per failure.
	SyncBackoffMin = time.Second
	SyncBackoffMax = 30 * time.Second
)

// DeliverFunc hands one user message to xAgent: the Bridge passes the
// Channel's Send, which returns once the message is pending (S1).
type DeliverFunc func(ctx context.Context, channelID string, m imv2.ChatMessage) error

// SyncEvents are the callbacks of RunSync; each may be nil.
type SyncEvents struct {
	// Deliver receives each user message; required.
	Deliver DeliverFunc
	// Gone is called when the binding stopped working for good: the token
	// was revoked (status expired) or the bot left the room (revoked).
	// RunSync returns right after.
	Gone func(channelID, status string)
}

// errGone ends RunSync after SyncEvents.Gone.
var errGone = errors.New("matrixbridge: binding gone")

// RunSync reads the bound room with /sync until ctx ends, handing each new
// m.room.message from another user to ev.Deliver as a chat.message whose
// message_id is derived from the event ID (MessageID). Media (m.image,
// m.video, m.audio, m.file) is downloaded from the media repository,
// stored with FileHost.OfferFile and offered by its signed download_url
// (M6). The /sync position is stored after the whole batch was delivered,
// so a crash replays at most one batch, and the replay is deduplicated by
// message_id. SignIn takes the first position, so history from before the
// sign-in is not forwarded; a binding without one starts at the next
// /sync likewise.
//
// Skipped: the bot's own events, edits (m.replace), redacted events,
// encrypted media (no end-to-end encryption here) and non-message events.
func (p *Platform) RunSync(ctx context.Context, channelID string, ev SyncEvents) error {
	r, err := p.room(channelID)
	if err != nil {
		return err
	}
	if ev.Deliver == nil {
		return errors.New("matrixbridge: SyncEvents.Deliver is required")
	}
	s := &syncer{p: p, r: r, ch: channelID, ev: ev}
	return s.run(ctx)
}

type syncer struct {
	p      *Platform
	r      *room
	ch     string
	ev     SyncEvents
	filter string
	fails  int
}

func (s *syncer) run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := s.once(ctx)
		switch {
		case err == nil:
			s.fails = 0
			continue
		case errors.Is(err, errGone):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		s.fails++
		d := SyncBackoffMin << min(s.fails-1, 5)
		d = min(d, SyncBackoffMax)
		s.p.log.Warn("matrixbridge: sync failed; retrying", "channel", s.ch, "err", err, "in", d)
		if err := s.sleep(ctx, d); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// sleep waits d on the Platform's clock.
func (s *syncer) sleep(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	t := s.p.clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// gone reports a binding that stopped working for good.
func (s *syncer) gone(status string) error {
	if s.ev.Gone != nil {
		s.ev.Gone(s.ch, status)
	}
	return errGone
}

// once runs one /sync and delivers its messages.
func (s *syncer) once(ctx context.Context) error {
	cli := s.r.cli
	if s.filter == "" {
		f, err := cli.CreateFilter(ctx, roomFilter(s.r.id))
		if err != nil {
			return s.check(classify("create filter", err))
		}
		s.filter = f.FilterID
	}
	since := s.r.binding().Since
	resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{
		Timeout:  int(s.p.syncTO.Milliseconds()),
		Since:    since,
		FilterID: s.filter,
	})
	if err != nil {
		return s.check(classify("sync", err))
	}
	if since == "" {
		// First sync of this binding: take the position, skip history.
		return s.advance(ctx, resp.NextBatch)
	}
	if _, left := resp.Rooms.Leave[s.r.id]; left {
		s.p.log.Warn("matrixbridge: the bot left or was removed from the room", "channel", s.ch)
		return s.gone(protocol.StatusRevoked)
	}
	if jr := resp.Rooms.Join[s.r.id]; jr != nil {
		events := jr.Timeline.Events
		if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
			gap, err := s.fillGap(ctx, jr.Timeline.PrevBatch, since)
			if err != nil {
				return s.check(err)
			}
			events = append(gap, events...)
		}
		for _, evt := range events {
			if err := s.handle(ctx, evt); err != nil {
				return s.check(err)
			}
		}
	}
	return s.advance(ctx, resp.NextBatch)
}

// check turns an expired token into Gone and passes other errors on.
func (s *syncer) check(err error) error {
	if isAuthGone(err) {
		s.p.log.Warn("matrixbridge: the access token no longer works", "channel", s.ch)
		return s.gone(protocol.StatusExpired)
	}
	return err
}

func (s *syncer) advance(ctx context.Context, next string) error {
	if next == "" {
		return nil
	}
	return s.p.update(ctx, s.r, func(b *Binding) bool {
		if b.Since == next {
			return false
		}
		b.Since = next
		return true
	})
}

// roomFilter asks /sync for the room's messages and membership changes
// only: no presence, account data, typing or other rooms.
func roomFilter(room id.RoomID) *mautrix.Filter {
	none := &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}}
	return &mautrix.Filter{
		AccountData: none,
		Presence:    none,
		EventFormat: mautrix.EventFormatClient,
		Room: &mautrix.RoomFilter{
			Rooms:        []id.RoomID{room},
			IncludeLeave: true,
			AccountData:  none,
			Ephemeral:    none,
			State:        none,
			// Member events in the timeline show the bot being removed.
			Timeline: &mautrix.FilterPart{Types: []event.Type{event.EventMessage, event.StateMember}, Limit: TimelineLimit},
		},
	}
}

// fillGap fetches the events between since and the start of a limited
// timeline (prevBatch), oldest first, at most MaxGapEvents.
func (s *syncer) fillGap(ctx context.Context, prevBatch, since string) ([]*event.Event, error) {
	filter := &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}
	var out []*event.Event
	from := prevBatch
	for len(out) < MaxGapEvents {
		resp, err := s.r.cli.Messages(ctx, s.r.id, from, since, mautrix.DirectionBackward, filter, 100)
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
		s.p.log.Warn("matrixbridge: more messages were missed than MaxGapEvents; older ones skipped", "channel", s.ch)
		out = out[:MaxGapEvents]
	}
	slices.Reverse(out)
	return out, nil
}

// handle converts one timeline event and delivers it. A delivery that
// fails is retried with the whole batch (the /sync position did not move).
func (s *syncer) handle(ctx context.Context, evt *event.Event) error {
	m, ok, err := s.convert(ctx, evt)
	if err != nil || !ok {
		return err
	}
	err = s.ev.Deliver(ctx, s.ch, m)
	if errors.Is(err, &imv2.Error{Code: imv2.CodeMessageIDConflict}) {
		// A replayed batch offered the same event's media again under a
		// new file_ref: the message is already pending or delivered.
		return nil
	}
	return err
}

// convert makes a chat.message of a user's m.room.message; ok is false for
// an event that is not forwarded.
func (s *syncer) convert(ctx context.Context, evt *event.Event) (imv2.ChatMessage, bool, error) {
	if evt.Type == event.StateMember && evt.StateKey != nil && id.UserID(*evt.StateKey) == s.r.me {
		if err := evt.Content.ParseRaw(evt.Type); err == nil {
			if mem := evt.Content.AsMember(); mem.Membership == event.MembershipLeave || mem.Membership == event.MembershipBan {
				return imv2.ChatMessage{}, false, s.gone(protocol.StatusRevoked)
			}
		}
		return imv2.ChatMessage{}, false, nil
	}
	if evt.Type != event.EventMessage || evt.Sender == s.r.me || evt.Unsigned.RedactedBecause != nil {
		return imv2.ChatMessage{}, false, nil
	}
	if err := evt.Content.ParseRaw(evt.Type); err != nil {
		s.p.log.Debug("matrixbridge: unparsable message skipped", "channel", s.ch, "err", err)
		return imv2.ChatMessage{}, false, nil
	}
	c := evt.Content.AsMessage()
	if c.RelatesTo != nil && c.RelatesTo.GetReplaceID() != "" {
		return imv2.ChatMessage{}, false, nil // an edit: the profile has no edit
	}
	m := imv2.ChatMessage{MessageID: MessageID(s.r.id.String(), evt.ID.String()), CreatedAt: evt.Timestamp}
	ft, media := fileTypeOf(c.MsgType)
	if !media {
		m.Text = c.Body
		return m, m.Text != "", nil
	}
	name := c.FileName
	if name == "" {
		name = c.Body
	} else if c.Body != "" && c.Body != c.FileName {
		m.Text = c.Body // a caption (Matrix v1.10 media captions)
	}
	f, ok, err := s.fetch(ctx, c, name)
	if err != nil {
		return imv2.ChatMessage{}, false, err
	}
	if !ok {
		if m.Text == "" {
			m.Text = c.Body // the file is gone or encrypted: forward its name
		}
		return m, m.Text != "", nil
	}
	f.Type = ft
	m.Files = []imv2.File{f}
	return m, true, nil
}

// fetch downloads one media event's content and offers it to xAgent. ok is
// false when the media cannot be had for good (encrypted, gone, too
// large); a transient failure is an error, so the batch is retried.
func (s *syncer) fetch(ctx context.Context, c *event.MessageEventContent, name string) (imv2.File, bool, error) {
	if c.URL == "" {
		s.p.log.Info("matrixbridge: encrypted or URL-less media skipped", "channel", s.ch)
		return imv2.File{}, false, nil
	}
	mxc, err := c.URL.Parse()
	if err != nil {
		return imv2.File{}, false, nil
	}
	resp, err := s.download(ctx, mxc)
	if err != nil {
		if imv2.IsRetryable(err) {
			return imv2.File{}, false, err
		}
		s.p.log.Info("matrixbridge: media not downloadable; forwarded without it", "channel", s.ch, "err", err)
		return imv2.File{}, false, nil
	}
	defer resp.Body.Close()
	mime := resp.Header.Get("Content-Type")
	if c.Info != nil && c.Info.MimeType != "" {
		mime = c.Info.MimeType
	}
	f, err := s.p.files.OfferFile(ctx, s.ch, name, mime, resp.Body)
	if err != nil {
		if imv2.IsRetryable(err) {
			return imv2.File{}, false, err
		}
		s.p.log.Info("matrixbridge: media not stored; forwarded without it", "channel", s.ch, "err", err)
		return imv2.File{}, false, nil
	}
	return f, true, nil
}

// download GETs the media with the authenticated endpoint (Matrix v1.11)
// and falls back to the legacy /_matrix/media/v3/download for a homeserver
// without it.
func (s *syncer) download(ctx context.Context, mxc id.ContentURI) (*http.Response, error) {
	resp, err := s.r.cli.Download(ctx, mxc)
	if err == nil {
		return resp, nil
	}
	if st := statusOf(classify("", err)); st != http.StatusNotFound && st != http.StatusMethodNotAllowed && st != http.StatusBadRequest {
		return nil, classify("download media", err)
	}
	_, resp, err = s.r.cli.MakeFullRequestWithResp(ctx, mautrix.FullRequest{
		Method:           http.MethodGet,
		URL:              s.r.cli.BuildURL(mautrix.MediaURLPath{"v3", "download", mxc.Homeserver, mxc.FileID}),
		DontReadResponse: true,
	})
	if err != nil {
		return nil, classify("download media", err)
	}
	return resp, nil
}
