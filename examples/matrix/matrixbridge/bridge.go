package matrixbridge

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/display"
	"github.com/xagentkit/imv2/protocol"
	"maunium.net/go/mautrix/id"
)

// Defaults of Config.
const (
	// DefaultTypingTimeout is sent with each typing notification; the kit
	// refreshes typing every display.DefaultTypingRefresh (4 s).
	DefaultTypingTimeout = 10 * time.Second
	// DefaultUploadCache bounds the media uploads remembered (LRU, by
	// transaction ID), so a retried final does not upload its files again.
	DefaultUploadCache = 1024
	// DefaultHTTPTimeout bounds one homeserver request, a /sync included.
	DefaultHTTPTimeout = 90 * time.Second
	// DefaultSyncTimeout is the long-poll timeout of /sync.
	DefaultSyncTimeout = 30 * time.Second
)

// Config configures a Bridge. APIKey and Build.BuildTime are required;
// zero fields take the defaults above.
type Config struct {
	// Build identifies the build in the Card and /health (H4).
	Build protocol.Build
	// APIKey guards /health, /ws and /files/uploads.
	APIKey string
	// StateDir keeps the sign-ins (bindings.json, mode 0600: it holds
	// access tokens) and the kit's pending, completed and binding state
	// (imv2.db), so a restart loses no user message and posts no final
	// twice (S8). Empty keeps everything in memory.
	StateDir string
	// Files stores uploads and offered media; default in memory.
	Files connector.FileStore
	// Display tunes the edit strategy (Interval, TypingRefresh …).
	Display display.Options
	// Channel tunes every Channel (AckTimeout …).
	Channel imv2.Options
	// HTTPClient talks to homeservers; default one of DefaultHTTPTimeout.
	HTTPClient    *http.Client
	TypingTimeout time.Duration
	UploadCache   int
	SyncTimeout   time.Duration
	// Logger; default discards. Tokens and message text are never logged.
	Logger *slog.Logger
	Clock  clock.Clock
}

// Bridge is the Matrix Connector: the connector kit's Connector around a
// Platform of Matrix rooms, one bound room per channel, read with /sync.
type Bridge struct {
	cfg     Config
	kit     *connector.Connector
	store   *Store
	bolt    *boltstore.Store
	http    *http.Client
	log     *slog.Logger
	uploads *lru.Cache[string, id.ContentURI]

	ctx    context.Context // ends at Close; parent of the sync loops
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	loops  map[string]*loop // by channel
}

type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds a Bridge with the sign-ins found in StateDir. Serve Handler()
// at the Connector's base URL; Close it to stop.
func New(cfg Config) (*Bridge, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("matrixbridge: Config.APIKey is required")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	cfg.Clock = cmp.Or[clock.Clock](cfg.Clock, clock.System{})
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{Timeout: DefaultHTTPTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()})
	cfg.TypingTimeout, cfg.SyncTimeout = cmp.Or(cfg.TypingTimeout, DefaultTypingTimeout), cmp.Or(cfg.SyncTimeout, DefaultSyncTimeout)
	br := &Bridge{cfg: cfg, http: cfg.HTTPClient, log: cfg.Logger, store: NewMemoryStore(), loops: map[string]*loop{}}
	br.uploads, _ = lru.New[string, id.ContentURI](cmp.Or(cfg.UploadCache, DefaultUploadCache))
	br.ctx, br.cancel = context.WithCancel(context.Background())
	opts := &connector.Options{APIKey: cfg.APIKey, Skill: []byte(Skill), Files: cfg.Files, Mode: display.Edit,
		Display: &cfg.Display, Channel: &cfg.Channel, OnChannelOpen: br.startSync, Clock: cfg.Clock, Logger: cfg.Logger}
	if cfg.StateDir != "" {
		var err error
		if err = os.MkdirAll(cfg.StateDir, 0o700); err == nil {
			br.store, err = OpenFileStore(filepath.Join(cfg.StateDir, "bindings.json"))
		}
		if err == nil {
			br.bolt, err = boltstore.Open(filepath.Join(cfg.StateDir, "imv2.db"), boltstore.Options{Clock: cfg.Clock})
			opts.Store = br.bolt // channel IDs, bindings and delivery state survive a restart
		}
		if err != nil {
			br.Close()
			return nil, err
		}
	}
	var err error
	if br.kit, err = connector.New(NewCard(cfg.Build), br, opts); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

// Handler is the Connector's http.Handler: serve it at the base URL.
func (br *Bridge) Handler() http.Handler { return br.kit }

// Store returns the sign-ins.
func (br *Bridge) Store() *Store { return br.store }

// Connector returns the kit's Connector, for what the Bridge does not wrap.
func (br *Bridge) Connector() *connector.Connector { return br.kit }

// Close stops the sync loops, the kit (every connection and Channel;
// pending messages stay in the store) and the state store.
func (br *Bridge) Close() error {
	br.cancel()
	br.wg.Wait()
	var err error
	if br.kit != nil {
		err = br.kit.Close()
	}
	if br.bolt != nil {
		err = errors.Join(err, br.bolt.Close())
	}
	br.http.CloseIdleConnections()
	return err
}

// startSync starts reading the channel's room — when xAgent (re)opens a
// bound channel, after a restart too, and after a sign-in — unless it is
// read already. Channels bound to one room each read it; the kit makes the
// second hand-over of an event a duplicate.
func (br *Bridge) startSync(channelID string) {
	b, ok := br.store.Get(channelID)
	br.mu.Lock()
	defer br.mu.Unlock()
	if !ok || b.Expired || br.ctx.Err() != nil || br.loops[channelID] != nil {
		return
	}
	ctx, cancel := context.WithCancel(br.ctx)
	l := &loop{cancel: cancel, done: make(chan struct{})}
	br.loops[channelID] = l
	br.wg.Add(1)
	go func() {
		defer br.wg.Done()
		defer close(l.done)
		// A channel not reopened since a restart, or not bound yet, makes
		// Receive fail: the batch comes again.
		err := br.RunSync(ctx, channelID, br.kit.Receive)
		br.mu.Lock()
		if br.loops[channelID] == l {
			delete(br.loops, channelID)
		}
		br.mu.Unlock()
		if cancel(); err != nil && ctx.Err() == nil {
			br.log.Warn("matrixbridge: room reading stopped", "channel", channelID, "err", err)
		}
	}()
}

// stopSync stops reading the channel's room and waits.
func (br *Bridge) stopSync(channelID string) {
	br.mu.Lock()
	l := br.loops[channelID]
	delete(br.loops, channelID)
	br.mu.Unlock()
	if l != nil {
		l.cancel()
		<-l.done
	}
}

// Start implements connector.SignIn for the form flow: sign in, join the
// room, bind the channel to it and read it. A refusal the user can fix is
// status failed with its reason; the token never leaves the Connector.
func (br *Bridge) Start(ctx context.Context, channelID string, req protocol.AuthStart) (connector.SignInResult, error) {
	ack := &protocol.AuthAck{FlowID: req.FlowID, AuthSessionID: "auth_" + uuid.NewString(), Status: protocol.AuthFailed}
	form, err := ParseForm(req.Input)
	var b Binding
	if err == nil {
		b, err = br.SignIn(ctx, channelID, form)
	}
	var se *SignInError
	if errors.As(err, &se) {
		ack.Message = se.Reason
		return connector.SignInResult{Ack: ack}, nil
	} else if err != nil {
		br.log.Warn("matrixbridge: sign-in failed", "channel", channelID, "err", err)
		ack.Message = "the homeserver could not be reached; try again"
		return connector.SignInResult{Ack: ack}, nil
	}
	if old, ok := br.store.Get(channelID); ok {
		br.stopSync(channelID)
		if old.AccessToken != b.AccessToken {
			_ = br.SignOut(ctx, old)
		}
	}
	b.Session = ack.AuthSessionID
	if err := br.store.Put(ctx, b); err != nil {
		_ = br.SignOut(context.WithoutCancel(ctx), b)
		return connector.SignInResult{}, err
	}
	ack.Status, ack.Message = protocol.AuthAuthenticated, "Bound to the Matrix room"
	target := protocol.DescriptorTarget{Provider: Provider, DisplayName: "Matrix room", AccountHint: redactUser(b.UserID)}
	defer br.startSync(channelID) // after the kit stored the binding
	return connector.SignInResult{Ack: ack, Bind: &connector.Binding{Key: b.RoomID, Target: target}}, nil
}

// Status implements connector.SignIn: the form flow finishes within
// auth.start, so this reports the channel's state.
func (br *Bridge) Status(_ context.Context, channelID string, req protocol.AuthStatusRequest) (connector.SignInResult, error) {
	b, ok := br.store.Get(channelID)
	if req.AuthSessionID != "" && req.AuthSessionID != b.Session {
		return connector.SignInResult{}, imv2.Errorf(protocol.CodeAuthSessionNotFound, "unknown auth_session_id")
	}
	ack := &protocol.AuthAck{FlowID: FlowID, AuthSessionID: req.AuthSessionID, Status: protocol.AuthUnauthenticated}
	if ok && b.Expired {
		ack.Status = protocol.AuthExpired
	} else if ok {
		ack.Status = protocol.AuthAuthenticated
	}
	return connector.SignInResult{Ack: ack}, nil
}

// Cancel implements connector.SignIn: nothing is ever left unfinished.
func (br *Bridge) Cancel(_ context.Context, channelID string, _ protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	if _, ok := br.store.Get(channelID); ok {
		return &protocol.AuthCancelAck{Status: "ignored", AuthStatus: protocol.AuthAuthenticated, Message: "already signed in"}, nil
	}
	return &protocol.AuthCancelAck{Status: "not_found", AuthStatus: protocol.AuthUnauthenticated}, nil
}

// Unbound implements connector.Unbinder (auth.logout, a channel dropped at
// the end of its offline grace): stop reading the room for the channel,
// forget its token and log out the device the Connector created.
func (br *Bridge) Unbound(ctx context.Context, kb connector.Binding) error {
	b, ok := br.store.Get(kb.ChannelID)
	if !ok {
		return nil
	}
	br.stopSync(b.ChannelID)
	err := br.store.Delete(ctx, b.ChannelID)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return errors.Join(err, br.SignOut(sctx, b))
}

// redactUser keeps the first two characters of the localpart and the
// server name: "@alice:example.org" → "@al***:example.org".
func redactUser(userID string) string {
	local, server, ok := strings.Cut(strings.TrimPrefix(userID, "@"), ":")
	if !ok {
		return "***"
	}
	return "@" + local[:min(len(local), 2)] + "***:" + server
}
