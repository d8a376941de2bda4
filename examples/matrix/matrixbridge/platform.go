package matrixbridge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/display"
	"github.com/xagentkit/imv2/protocol"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// FileHost is where the Connector keeps file bytes: the files xAgent
// uploaded for a final (M7) and the Matrix media it offers to xAgent (M6).
// *connector.Handler implements it.
type FileHost interface {
	OfferFile(ctx context.Context, channelID, filename, mimeType string, r io.Reader) (imv2.File, error)
	OpenFile(ctx context.Context, channelID, fileRef string) (io.ReadCloser, connector.FileInfo, error)
}

// Defaults of PlatformOptions.
const (
	// DefaultTypingTimeout is the timeout sent with each Matrix typing
	// notification. The display strategy refreshes typing every 4 s
	// (display.DefaultTypingRefresh) while the agent works, and clears it
	// explicitly: Dendrite does not report the expiry in /sync.
	DefaultTypingTimeout = 10 * time.Second
	// DefaultUploadCache bounds the media uploads remembered per process
	// (by transaction ID), so a retried final does not upload its files
	// again.
	DefaultUploadCache = 1024
	// DefaultHTTPTimeout bounds one homeserver request (a /sync long poll
	// included).
	DefaultHTTPTimeout = 90 * time.Second
)

// PlatformOptions configure a Platform; zero fields take the defaults.
type PlatformOptions struct {
	// Store keeps the bindings; default a MemoryStore.
	Store Store
	// Files is required: it opens xAgent's uploads and stores Matrix media.
	Files FileHost
	// HTTPClient talks to homeservers; default one with DefaultHTTPTimeout
	// and its own Transport, whose idle connections Close closes.
	HTTPClient *http.Client
	// Logger; default discards. Tokens and message text are never logged.
	Logger *slog.Logger
	// Clock drives the /sync backoff; default clock.System{}.
	Clock clock.Clock
	// TypingTimeout is sent with each typing notification.
	TypingTimeout time.Duration
	// UploadCache bounds the remembered uploads.
	UploadCache int
	// SyncTimeout is the long-poll timeout of /sync; default 30 s.
	SyncTimeout time.Duration
}

// Platform shows assistant messages in Matrix rooms, one bound room per
// connector_channel_id: it implements display.Platform, display.Editor,
// display.Typer and display.Discarder, and reads user messages with /sync
// (RunSync). Wrap it with display.New(p, &display.Options{Mode:
// display.Edit}) to get the imv2 Target of every channel.
//
// Every event of an assistant message is sent with a transaction ID
// derived from its connector_channel_id and message_id, so a resend of the
// same final — a retry, or xAgent's resend after a Connector restart — is
// deduplicated by the homeserver too, not only by the SDK's completed
// store.
type Platform struct {
	store   Store
	files   FileHost
	http    *http.Client
	ownHTTP bool
	log     *slog.Logger
	clock   clock.Clock
	typing  time.Duration
	syncTO  time.Duration
	uploads *lru.Cache[string, upload]

	mu    sync.Mutex
	rooms map[string]*room // by connector_channel_id
}

var (
	_ display.Editor    = (*Platform)(nil)
	_ display.Typer     = (*Platform)(nil)
	_ display.Discarder = (*Platform)(nil)
)

// upload is a file already in the Matrix media repository.
type upload struct {
	mxc      id.ContentURI
	filename string
	mime     string
	size     int64
}

// room is one bound channel.
type room struct {
	cli *mautrix.Client
	id  id.RoomID
	me  id.UserID

	mu sync.Mutex // guards b and serialises its store writes
	b  Binding
}

// NewPlatform returns a Platform with no room bound; Bind or Restore add
// them.
func NewPlatform(o PlatformOptions) (*Platform, error) {
	if o.Files == nil {
		return nil, errors.New("matrixbridge: PlatformOptions.Files is required")
	}
	p := &Platform{
		store:  o.Store,
		files:  o.Files,
		http:   o.HTTPClient,
		log:    o.Logger,
		clock:  o.Clock,
		typing: o.TypingTimeout,
		syncTO: o.SyncTimeout,
		rooms:  map[string]*room{},
	}
	if p.store == nil {
		p.store = NewMemoryStore()
	}
	if p.http == nil {
		p.http = &http.Client{Timeout: DefaultHTTPTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
		p.ownHTTP = true
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.clock == nil {
		p.clock = clock.System{}
	}
	if p.typing <= 0 {
		p.typing = DefaultTypingTimeout
	}
	if p.syncTO <= 0 {
		p.syncTO = 30 * time.Second
	}
	n := o.UploadCache
	if n <= 0 {
		n = DefaultUploadCache
	}
	p.uploads, _ = lru.New[string, upload](n) // n > 0: no error
	return p, nil
}

// Close closes the idle connections of the Platform's own HTTP client.
// Stop every RunSync (cancel its context) first.
func (p *Platform) Close() {
	if p.ownHTTP {
		p.http.CloseIdleConnections()
	}
}

// Restore binds every channel the Store holds, after a restart. It does
// not contact the homeserver.
func (p *Platform) Restore(ctx context.Context) ([]string, error) {
	list, err := p.store.Load(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, b := range list {
		r, err := p.newRoom(b)
		if err != nil {
			p.log.Warn("matrixbridge: stored binding unusable; skipped", "channel", b.ChannelID, "err", err)
			continue
		}
		p.mu.Lock()
		p.rooms[b.ChannelID] = r
		p.mu.Unlock()
		ids = append(ids, b.ChannelID)
	}
	return ids, nil
}

// Bind stores b and binds its channel to its room, replacing an earlier
// binding of the channel.
func (p *Platform) Bind(ctx context.Context, b Binding) error {
	r, err := p.newRoom(b)
	if err != nil {
		return err
	}
	if err := p.store.Put(ctx, b); err != nil {
		return err
	}
	p.mu.Lock()
	p.rooms[b.ChannelID] = r
	p.mu.Unlock()
	return nil
}

// Unbind forgets the channel's binding, in memory and in the Store.
func (p *Platform) Unbind(ctx context.Context, channelID string) (Binding, bool, error) {
	p.mu.Lock()
	r := p.rooms[channelID]
	delete(p.rooms, channelID)
	p.mu.Unlock()
	if r == nil {
		return Binding{}, false, nil
	}
	return r.binding(), true, p.store.Delete(ctx, channelID)
}

// Bound returns the channel's binding.
func (p *Platform) Bound(channelID string) (Binding, bool) {
	r, err := p.room(channelID)
	if err != nil {
		return Binding{}, false
	}
	return r.binding(), true
}

// Client returns the Matrix client of a bound channel, for callers that
// need more of the Matrix API.
func (p *Platform) Client(channelID string) (*mautrix.Client, bool) {
	r, err := p.room(channelID)
	if err != nil {
		return nil, false
	}
	return r.cli, true
}

func (p *Platform) newRoom(b Binding) (*room, error) {
	cli, err := p.newClient(b.Homeserver, b.UserID, b.AccessToken)
	if err != nil {
		return nil, err
	}
	cli.DeviceID = id.DeviceID(b.DeviceID)
	return &room{cli: cli, id: id.RoomID(b.RoomID), me: id.UserID(b.UserID), b: b.clone()}, nil
}

// newClient returns a mautrix client that never retries or sleeps by
// itself: a failure goes straight back to the Channel, whose retry has
// backoff, jitter and an expiry (A7), and a 429 becomes a retryable
// rejection instead of a blocked Target call.
func (p *Platform) newClient(homeserver, userID, token string) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(homeserver, id.UserID(userID), token)
	if err != nil {
		return nil, imv2.Permanent(errors.New("matrixbridge: invalid homeserver URL"))
	}
	cli.Client = p.http
	cli.DefaultHTTPRetries = 0
	cli.IgnoreRateLimit = true
	cli.UserAgent = "imv2-matrixbridge/" + Version
	return cli, nil
}

func (p *Platform) room(channelID string) (*room, error) {
	p.mu.Lock()
	r := p.rooms[channelID]
	p.mu.Unlock()
	if r == nil {
		// Deterministic: the channel has no signed-in room (A8).
		e := imv2.Errorf(protocol.CodeConnectionNotAuthenticated, "matrixbridge: channel is not bound to a Matrix room")
		return nil, imv2.Permanent(e)
	}
	return r, nil
}

func (r *room) binding() Binding {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.clone()
}

// update changes the binding and stores it; a store failure is returned
// after the in-memory change (the caller logs it).
func (p *Platform) update(ctx context.Context, r *room, f func(b *Binding) bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !f(&r.b) {
		return nil
	}
	p.mu.Lock()
	current := p.rooms[r.b.ChannelID] == r
	p.mu.Unlock()
	if !current {
		return nil // unbound meanwhile: do not resurrect it in the store
	}
	return p.store.Put(ctx, r.b)
}

func (r *room) draft(messageID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.b.Drafts[messageID]
	return h, ok
}

// sendEvent sends one m.room.message with transaction ID txn.
func (r *room) sendEvent(ctx context.Context, op, txn string, content *event.MessageEventContent) (id.EventID, error) {
	resp, err := r.cli.SendMessageEvent(ctx, r.id, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txn})
	if err != nil {
		return "", classify(op, err)
	}
	return resp.EventID, nil
}

func textContent(text string) *event.MessageEventContent {
	return &event.MessageEventContent{MsgType: event.MsgText, Body: text}
}

// editContent replaces the body of event target with text (m.replace). The
// fallback body is the whole text with the "* " prefix clients show for
// an edit they cannot apply.
func editContent(target id.EventID, text string) *event.MessageEventContent {
	return &event.MessageEventContent{
		MsgType:    event.MsgText,
		Body:       "* " + text,
		NewContent: textContent(text),
		RelatesTo:  (&event.RelatesTo{}).SetReplace(target),
	}
}

// Send posts m as a new message: its text as one m.text event, then each
// file as one m.image/m.video/m.audio/m.file event after its upload to the
// media repository. It returns only after every event was sent (M12).
// When a draft of m was posted before a restart (its handle survived in
// the Store), that draft is turned into m instead (M11).
func (p *Platform) Send(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	r, err := p.room(channelID)
	if err != nil {
		return err
	}
	if h, ok := r.draft(m.MessageID); ok {
		return p.finish(ctx, channelID, r, h, m)
	}
	key := txnKey(channelID, m.MessageID)
	if m.Text != "" {
		if _, err := r.sendEvent(ctx, "send text", txnText(key), textContent(m.Text)); err != nil {
			return err
		}
	}
	return p.sendFiles(ctx, channelID, r, key, m.Files)
}

// Post shows the first draft of an assistant message as a new m.text event
// and returns its event ID. Its handle is stored, so a final after a
// restart still finds it.
func (p *Platform) Post(ctx context.Context, channelID, messageID, text string) (string, error) {
	r, err := p.room(channelID)
	if err != nil {
		return "", err
	}
	ev, err := r.sendEvent(ctx, "post draft", txnDraft(txnKey(channelID, messageID)), textContent(text))
	if err != nil {
		return "", err
	}
	if err := p.update(ctx, r, func(b *Binding) bool { b.addDraft(messageID, ev.String()); return true }); err != nil {
		p.log.Warn("matrixbridge: draft handle not stored; a final after a restart would post anew", "channel", channelID, "err", err)
	}
	return ev.String(), nil
}

// Edit replaces the draft's text with an m.replace event.
func (p *Platform) Edit(ctx context.Context, channelID, handle, text string) error {
	r, err := p.room(channelID)
	if err != nil {
		return err
	}
	_, err = r.sendEvent(ctx, "edit draft", r.cli.TxnID(), editContent(id.EventID(handle), text))
	return err
}

// Finish turns the draft into the final m: one last edit whose body is
// exactly m.Text (M11) — or, for a final without text, a redaction of the
// draft — then the files, as Send does.
func (p *Platform) Finish(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error {
	r, err := p.room(channelID)
	if err != nil {
		return err
	}
	return p.finish(ctx, channelID, r, handle, m)
}

func (p *Platform) finish(ctx context.Context, channelID string, r *room, handle string, m *imv2.ChatMessage) error {
	key := txnKey(channelID, m.MessageID)
	if m.Text != "" {
		if _, err := r.sendEvent(ctx, "finish draft", txnText(key), editContent(id.EventID(handle), m.Text)); err != nil {
			return err
		}
	} else if _, err := r.cli.RedactEvent(ctx, r.id, id.EventID(handle), mautrix.ReqRedact{TxnID: txnDiscard(key)}); err != nil {
		return classify("redact draft", err)
	}
	if err := p.sendFiles(ctx, channelID, r, key, m.Files); err != nil {
		return err
	}
	if err := p.update(ctx, r, func(b *Binding) bool { return b.dropDraft(m.MessageID) }); err != nil {
		p.log.Warn("matrixbridge: draft handle not removed from the store", "channel", channelID, "err", err)
	}
	return nil
}

// Discard redacts a draft whose final never came (display's idle TTL).
func (p *Platform) Discard(ctx context.Context, channelID, handle string) error {
	r, err := p.room(channelID)
	if err != nil {
		return err
	}
	if _, err := r.cli.RedactEvent(ctx, r.id, id.EventID(handle)); err != nil {
		return classify("redact draft", err)
	}
	_ = p.update(ctx, r, func(b *Binding) bool {
		for mid, h := range b.Drafts {
			if h == handle {
				return b.dropDraft(mid)
			}
		}
		return false
	})
	return nil
}

// Typing shows (thinking, tool) or clears (idle) the bot's typing
// notification in the room (C5); Matrix typing has no status line, so the
// tool name is not shown. Showing sends TypingTimeout; clearing sends
// typing=false, since Dendrite does not push the expiry to /sync.
func (p *Platform) Typing(ctx context.Context, channelID string, a imv2.ChatActivity) error {
	r, err := p.room(channelID)
	if err != nil {
		return err
	}
	on := a.Status != imv2.ActivityIdle
	var timeout time.Duration
	if on {
		timeout = p.typing
	}
	if _, err := r.cli.UserTyping(ctx, r.id, on, timeout); err != nil {
		return classify("typing", err)
	}
	return nil
}

// sendFiles uploads each file (M7: xAgent uploaded it to this Connector
// first) to the media repository and sends its event. Uploads are
// remembered by transaction ID (UploadCache), so a retry sends the events
// again without a second upload.
func (p *Platform) sendFiles(ctx context.Context, channelID string, r *room, key string, files []imv2.File) error {
	for i := range files {
		f := &files[i]
		txn := txnFile(key, i)
		up, ok := p.uploads.Get(txn)
		if !ok {
			var err error
			if up, err = p.uploadFile(ctx, channelID, r, f); err != nil {
				return err
			}
			p.uploads.Add(txn, up)
		}
		content := &event.MessageEventContent{
			MsgType:  msgTypeOf(f.Type),
			Body:     up.filename,
			FileName: up.filename,
			URL:      up.mxc.CUString(),
			Info:     &event.FileInfo{MimeType: up.mime, Size: int(up.size)},
		}
		if _, err := r.sendEvent(ctx, "send file", txn, content); err != nil {
			return err
		}
		// The upload stays remembered: a resend of this final (its ack
		// lost) sends the event again, deduplicated by txn, without
		// uploading the bytes a second time.
	}
	return nil
}

func (p *Platform) uploadFile(ctx context.Context, channelID string, r *room, f *imv2.File) (upload, error) {
	rc, info, err := p.files.OpenFile(ctx, channelID, f.FileRef)
	if err != nil {
		// An unknown or expired file_ref never appears on a resend (A8).
		return upload{}, imv2.Permanent(err)
	}
	defer rc.Close()
	up := upload{filename: info.Filename, mime: info.MimeType, size: info.ByteSize}
	if up.filename == "" {
		up.filename = f.Filename
	}
	if up.filename == "" {
		up.filename = "file"
	}
	if up.mime == "" {
		up.mime = "application/octet-stream"
	}
	resp, err := r.cli.UploadMedia(ctx, mautrix.ReqUploadMedia{
		Content:       rc,
		ContentLength: info.ByteSize,
		ContentType:   up.mime,
		FileName:      up.filename,
	})
	if err != nil {
		return upload{}, classify("upload media", err)
	}
	up.mxc = resp.ContentURI
	return up, nil
}

// msgTypeOf maps files[].type (M4) to the Matrix msgtype.
func msgTypeOf(t imv2.FileType) event.MessageType {
	switch t {
	case imv2.FileImage:
		return event.MsgImage
	case imv2.FileVideo:
		return event.MsgVideo
	case imv2.FileAudio:
		return event.MsgAudio
	}
	return event.MsgFile
}

// fileTypeOf maps a Matrix msgtype to files[].type; ok is false for a
// msgtype that carries no file.
func fileTypeOf(t event.MessageType) (imv2.FileType, bool) {
	switch t {
	case event.MsgImage:
		return imv2.FileImage, true
	case event.MsgVideo:
		return imv2.FileVideo, true
	case event.MsgAudio:
		return imv2.FileAudio, true
	case event.MsgFile:
		return imv2.FileFile, true
	}
	return "", false
}
