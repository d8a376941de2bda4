package xmppbridge

// kit.go is the one file that speaks the Connector kit's surface: New
// builds the kit around the Bridge, and the Bridge's methods below are the
// kit's Platform and its capabilities, each a thin call into the XMPP
// side (platform.go, inbound.go, session.go).

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
)

// Defaults of Config.
const (
	DefaultDialTimeout = 30 * time.Second
	DefaultHTTPTimeout = 2 * time.Minute
	// DefaultMaxStanzaBytes is ejabberd's usual c2s max_stanza_size;
	// Prosody's c2s_stanza_size_limit is 256 KiB.
	DefaultMaxStanzaBytes = 64 << 10
)

// Config configures a Bridge. APIKey, JID, Password, Conversation and
// Build.BuildTime are required; zero fields take the defaults.
type Config struct {
	// Build identifies the build in the Card and /health (H4).
	Build protocol.Build
	// APIKey guards /health, /ws and /files/uploads.
	APIKey string
	// MetricsToken, when set, is what a scraper sends as "Authorization:
	// Bearer TOKEN" for /metrics (connector.Advanced.MetricsToken). The
	// API key never opens /metrics: without a token, serve it on an
	// address of its own (connector.Connector.StartMonitor).
	MetricsToken string
	// JID and Password are the bot account's: the Connector signs in as it
	// and never forwards its own messages.
	JID, Password string
	// Server is the host:port of the server's client port; "" looks the
	// JID's domain up in DNS (SRV records, else port 5222).
	Server string
	// TLS secures the stream (STARTTLS is required); default checks the
	// server's certificate against the system roots for the JID's domain.
	TLS *tls.Config
	// Conversation is where every channel goes: a contact's bare JID
	// ("alice@example.org", 1:1) or a room's joined with "?join"
	// ("team@conference.example.org?join", XEP-0045).
	Conversation string
	// Nick is the bot's nickname in the room; default the JID's localpart.
	Nick string
	// UploadService is the JID of the XEP-0363 service files go to;
	// default "upload." and the JID's domain (Prosody's mod_http_file_share).
	UploadService string
	// FileHosts are the host[:port]s inbound file URLs are fetched from
	// (the upload service's); default the upload service's JID. Every
	// redirect hop must stay on them too.
	FileHosts []string
	// PrivateFileHosts lets the FileHosts be on loopback or private
	// addresses (an upload service on the same machine or network). By
	// default the download client dials public addresses only, as
	// xfiles.Fetch does (xfiles.GuardedClient): a file host's name that
	// resolves to 127.0.0.1 or 169.254.169.254 is refused. It never uses
	// a proxy, the environment's included.
	PrivateFileHosts bool
	// StateDir keeps the kit's state in imv2.db: channel IDs, bindings
	// with their draft handles, pending and completed messages, so a
	// restart loses no user message and shows no final twice. Empty keeps
	// everything in memory.
	StateDir string
	// Files stores uploads and offered files; default in memory.
	Files connector.FileStore
	// Mode is how a streamed reply shows: connector.ModeEdit (default),
	// one message corrected as the deltas arrive, or connector.ModeBuffer,
	// the final only.
	Mode connector.Mode
	// Display tunes the edit strategy (Interval, TypingRefresh …).
	Display connector.Display
	// Channel tunes every Channel (AckTimeout …).
	Channel imv2.Options
	// HTTPClient uploads and downloads files; default one of
	// DefaultHTTPTimeout. Downloads use a guarded copy of it
	// (PrivateFileHosts); its transport must be nil or an *http.Transport.
	HTTPClient  *http.Client
	DialTimeout time.Duration
	// MaxStanzaBytes is the largest stanza the server takes: a longer
	// one is never sent (a server closes the stream of a client that
	// sends one, and everything in flight with it). The kit keeps texts
	// to three quarters of it (Display.MaxTextBytes, unless set): drafts
	// cut, longer finals refused for good; the rest is the stanza's
	// envelope and XML escaping.
	MaxStanzaBytes int
	// Logger; default discards. Passwords and message text are never logged.
	Logger *slog.Logger
	Clock  clock.Clock
}

// Bridge is the XMPP Connector: the kit's Connector around one XMPP
// session of the bot account, every channel bound to Config.Conversation.
type Bridge struct {
	cfg    Config
	me     jid.JID
	kit    *connector.Connector
	bolt   *boltstore.Store
	files  *http.Client    // the guarded download client
	upload jid.JID         // the XEP-0363 service
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the session loop (run) ended

	wg sync.WaitGroup // goroutines sending a room join

	mu      sync.Mutex
	s       *xmpp.Session            // nil while offline
	up      chan struct{}            // closed while s is set
	gone    chan struct{}            // closed when s ends
	readers map[*queue]string        // running Listens, by their conversation key
	rooms   map[string]*roomState    // by the room's JID
	queries map[string]*archiveQuery // running archive queries, by query ID
	changed chan struct{}            // closed (and replaced) at a change Reading waits for
	tried   chan struct{}            // closed when the first sign-in ended; then nil
	lastErr error                    // of the last sign-in
	refused error                    // the server refused the credentials: no more sign-ins
}

// New signs the bot in (in the background, again whenever the session
// drops) and builds the kit around it. Serve Handler() at the Connector's
// base URL; Close it to stop.
func New(cfg Config) (*Bridge, error) {
	me, err := jid.Parse(cfg.JID)
	switch {
	case cfg.APIKey == "":
		return nil, errors.New("xmppbridge: Config.APIKey is required")
	case err != nil || me.Localpart() == "":
		return nil, errors.New("xmppbridge: Config.JID must be an account's JID, user@domain")
	case cfg.Password == "":
		return nil, errors.New("xmppbridge: Config.Password is required")
	case cfg.Conversation == "":
		return nil, errors.New("xmppbridge: Config.Conversation is required")
	}
	if to, err := jid.Parse(strings.TrimSuffix(cfg.Conversation, roomSuffix)); err != nil || to.Localpart() == "" || to.Resourcepart() != "" {
		return nil, errors.New("xmppbridge: Config.Conversation must be a bare JID, with ?join for a room")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	cfg.Clock = cmp.Or[clock.Clock](cfg.Clock, clock.System{})
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{Timeout: DefaultHTTPTimeout})
	cfg.DialTimeout = cmp.Or(cfg.DialTimeout, DefaultDialTimeout)
	cfg.MaxStanzaBytes = cmp.Or(cfg.MaxStanzaBytes, DefaultMaxStanzaBytes)
	cfg.Nick = cmp.Or(cfg.Nick, me.Localpart())
	cfg.UploadService = cmp.Or(cfg.UploadService, "upload."+me.Domainpart())
	if len(cfg.FileHosts) == 0 {
		cfg.FileHosts = []string{cfg.UploadService}
	}
	if cfg.TLS == nil {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// XEP-0085 chat states are sticky, and a standalone state must not be
	// sent twice in a row: never refreshed.
	cfg.Display.TypingRefresh = cmp.Or(cfg.Display.TypingRefresh, -1)
	cfg.Display.MaxTextBytes = cmp.Or(cfg.Display.MaxTextBytes, cfg.MaxStanzaBytes*3/4)
	br := &Bridge{cfg: cfg, me: me, done: make(chan struct{}), up: make(chan struct{}), readers: map[*queue]string{},
		rooms: map[string]*roomState{}, queries: map[string]*archiveQuery{}, changed: make(chan struct{}), tried: make(chan struct{})}
	if br.upload, err = jid.Parse(cfg.UploadService); err != nil {
		return nil, fmt.Errorf("xmppbridge: Config.UploadService: %w", err)
	}
	if br.files, err = fileClient(cfg); err != nil {
		return nil, err
	}
	br.ctx, br.cancel = context.WithCancel(context.Background())
	opts := &connector.Options{APIKey: cfg.APIKey, Skill: []byte(Skill), Files: cfg.Files,
		Mode: cmp.Or(cfg.Mode, connector.ModeEdit), Logger: cfg.Logger,
		DefaultConversation: func(string) string { return cfg.Conversation },
		Advanced:            connector.Advanced{Display: cfg.Display, Channel: &cfg.Channel, Clock: cfg.Clock, MetricsToken: cfg.MetricsToken}}
	if cfg.StateDir != "" {
		if err = os.MkdirAll(cfg.StateDir, 0o700); err == nil {
			br.bolt, err = boltstore.Open(filepath.Join(cfg.StateDir, "imv2.db"), boltstore.Options{Clock: cfg.Clock})
			opts.Store = br.bolt
		}
	}
	if err == nil {
		br.kit, err = connector.New(NewCard(cfg.Build), br, opts)
	}
	if err != nil {
		br.Close()
		return nil, err
	}
	go br.run()
	return br, nil
}

// Handler is the Connector's http.Handler: serve it at the base URL.
func (br *Bridge) Handler() http.Handler { return br.kit }

// Connector returns the kit's Connector, for what the Bridge does not wrap.
func (br *Bridge) Connector() *connector.Connector { return br.kit }

// Close stops the kit (connections, readers, Channels; pending messages
// stay in the store), the XMPP session and the state store.
func (br *Bridge) Close() error {
	br.cancel()
	var err error
	if br.kit != nil { // else run never started
		err = br.kit.Close()
		<-br.done
	}
	br.wg.Wait()
	if br.bolt != nil {
		err = errors.Join(err, br.bolt.Close())
	}
	br.cfg.HTTPClient.CloseIdleConnections()
	if br.files != nil {
		br.files.CloseIdleConnections()
	}
	return err
}

// Post implements connector.Platform: the text as one message, then each
// file as a message with its uploaded URL. Once one of them was shown, a
// failure is no longer "not posted": posting it all again would show the
// shown part twice (XMPP does not deduplicate messages).
func (br *Bridge) Post(ctx context.Context, to connector.Conversation, m *connector.Message) error {
	shown := false
	fail := func(err error) error {
		br.cfg.Logger.Warn("xmppbridge: message not posted", "shown_in_part", shown, "err", err)
		if shown {
			return fmt.Errorf("xmppbridge: part of the message was shown: %v", err)
		}
		return err
	}
	if m.Text != "" {
		if err := br.say(ctx, to.Key, m.IdempotencyKey+"-t", m.Text); err != nil {
			return fail(err)
		}
		shown = true
	}
	for i, f := range m.Attachments {
		name := cmp.Or(f.Info.Filename, f.Filename, "file")
		if err := br.attach(ctx, to.Key, m.IdempotencyKey+"-f"+strconv.Itoa(i), name, f.Info.MimeType, f.Info.ByteSize, f.Reader); err != nil {
			return fail(err)
		}
		shown = true
	}
	return nil
}

// PostDraft implements connector.Editor: the first draft is a new message;
// its stanza ID is the handle every correction names.
func (br *Bridge) PostDraft(ctx context.Context, to connector.Conversation, _, text string) (string, error) {
	id := newID()
	return id, br.say(ctx, to.Key, id, text)
}

// Edit implements connector.Editor with an XEP-0308 correction; the
// kit's final edit makes the draft the final text (M11).
func (br *Bridge) Edit(ctx context.Context, to connector.Conversation, handle, text string) error {
	return br.correct(ctx, to.Key, handle, text)
}

// Typing implements connector.Typer with XEP-0085 chat states.
func (br *Bridge) Typing(ctx context.Context, to connector.Conversation, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityIdle {
		return br.chatState(ctx, to.Key, "active")
	}
	return br.chatState(ctx, to.Key, "composing")
}

// Listen implements connector.Listener: the kit runs it while the
// channel is open; it hands the conversation's messages to the kit, whose
// message_id of an event is the same on a redelivery. A shared file is
// downloaded first; one that cannot be is forwarded as its URL.
func (br *Bridge) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	return br.read(ctx, b.Key, b.Created, func(ctx context.Context, m incoming) error {
		ev := connector.InboundEvent{Conversation: b.Key, EventID: m.id, Text: m.text}
		if m.url != "" {
			data, mime, err := br.fetch(ctx, m.url, br.kit.MaxFileBytes())
			if err != nil {
				br.cfg.Logger.Info("xmppbridge: shared file not downloaded; forwarded as its URL", "err", err)
				ev.Text = cmp.Or(ev.Text, m.url)
			} else {
				ev.Files = []connector.InboundFile{{Filename: path.Base(m.url), MimeType: mime,
					Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}}
			}
		}
		return in.Receive(ctx, ev)
	})
}
