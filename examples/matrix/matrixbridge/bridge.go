package matrixbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/display"
	"github.com/xagentkit/imv2/protocol"
)

// Config configures a Bridge. APIKey and Build.BuildTime are required.
type Config struct {
	// Build identifies the build in the Card and /health (H4).
	Build protocol.Build
	// APIKey guards /health, /ws and /files/uploads (the Card sets
	// security.api_key_required).
	APIKey string
	// StateDir keeps the bindings (bindings.json, mode 0600: it holds
	// access tokens) and the pending and completed stores (imv2.db,
	// boltstore), so a restart loses no user message and posts no final
	// twice (S8). Empty keeps everything in memory (tests).
	StateDir string
	// Files stores uploads and offered media; default the connector kit's
	// in-memory store (files do not survive a restart).
	Files connector.FileStore
	// Display tunes the edit strategy (Interval, TypingRefresh …); its
	// Mode, Clock and Logger are set by the Bridge.
	Display display.Options
	// Platform tunes the Matrix side (TypingTimeout, HTTPClient …); its
	// Store, Files, Clock and Logger are set by the Bridge.
	Platform PlatformOptions
	// Channel tunes every Channel (AckTimeout, retries …); Pending and
	// Completed come from StateDir when it is set.
	Channel imv2.Options
	// Logger; default discards. Clock; default clock.System{}.
	Logger *slog.Logger
	Clock  clock.Clock
}

// Bridge is the Matrix Connector: the connector kit's HTTP handler (Card,
// /skill.md, /health, uploads, signed downloads), the data plane at /ws,
// the sign-in form, and per bound channel a Matrix room shown through the
// display package's edit strategy and read with /sync.
type Bridge struct {
	card     *protocol.Card
	log      *slog.Logger
	clock    clock.Clock
	handler  *connector.Handler
	server   *dataplane.Server
	platform *Platform
	target   *display.Target
	bolt     *boltstore.Store

	ctx    context.Context // ends at Close; parent of the sync loops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// authMu serialises auth.start and auth.logout: sign-in is rare, and
	// two concurrent sign-ins of one channel must not both bind it.
	authMu sync.Mutex

	mu       sync.Mutex
	closed   bool
	syncs    map[string]*syncLoop // by channel; at most one per bound channel
	status   map[string]string    // channels whose binding stopped working: expired, revoked
	sessions map[string]string    // last auth_session_id per channel
}

type syncLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

var _ dataplane.AuthHandler = (*Bridge)(nil)

// New builds a Bridge and restores the bindings found in StateDir. Serve
// Handler() at the Connector's base URL; Close it to stop.
func New(cfg Config) (*Bridge, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("matrixbridge: Config.APIKey is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	b := &Bridge{
		card:     NewCard(cfg.Build),
		log:      cfg.Logger,
		clock:    cfg.Clock,
		syncs:    map[string]*syncLoop{},
		status:   map[string]string{},
		sessions: map[string]string{},
	}
	if err := b.card.Validate(); err != nil {
		return nil, err
	}
	var bindings Store = NewMemoryStore()
	chOpts := cfg.Channel
	chOpts.Clock, chOpts.Logger = cfg.Clock, cfg.Logger
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("matrixbridge: state dir: %w", err)
		}
		fs, err := OpenFileStore(filepath.Join(cfg.StateDir, "bindings.json"))
		if err != nil {
			return nil, err
		}
		bindings = fs
		if b.bolt, err = boltstore.Open(filepath.Join(cfg.StateDir, "imv2.db"), boltstore.Options{Clock: cfg.Clock}); err != nil {
			return nil, err
		}
		chOpts.Pending, chOpts.Completed = b.bolt.Pending(), b.bolt.Completed()
	}
	fail := func(err error) (*Bridge, error) {
		if b.bolt != nil {
			_ = b.bolt.Close()
		}
		return nil, err
	}

	var registry dataplane.ChannelRegistry // default: in memory
	if b.bolt != nil {
		registry = b.bolt // channel IDs survive a restart with their state
	}
	var err error
	b.server, err = dataplane.NewServer(dataplane.ServerConfig{
		Card:          b.card,
		NewTarget:     func(string) imv2.Target { return b.target },
		Describe:      b.describe,
		Auth:          b,
		Registry:      registry,
		OnChannelOpen: b.channelOpen,
		OnChannelDrop: b.channelDrop,
		Options:       &chOpts,
		Logger:        cfg.Logger,
		Clock:         cfg.Clock,
		Label:         "Matrix",
	})
	if err != nil {
		return fail(err)
	}
	b.handler, err = connector.NewHandler(connector.Config{
		Card:     b.card,
		Markdown: []byte(Skill),
		APIKey:   cfg.APIKey,
		WS:       b.server,
		Files:    cfg.Files,
		Clock:    cfg.Clock,
		Logger:   cfg.Logger,
	})
	if err != nil {
		_ = b.server.Close()
		return fail(err)
	}
	po := cfg.Platform
	po.Store, po.Files, po.Clock, po.Logger = bindings, b.handler, cfg.Clock, cfg.Logger
	if b.platform, err = NewPlatform(po); err != nil {
		_ = b.server.Close()
		return fail(err)
	}
	do := cfg.Display
	do.Mode, do.Clock, do.Logger = display.Edit, cfg.Clock, cfg.Logger
	if b.target, err = display.New(b.platform, &do); err != nil {
		_ = b.server.Close()
		b.platform.Close()
		return fail(err)
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	ids, err := b.platform.Restore(b.ctx)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	if len(ids) > 0 {
		b.log.Info("matrixbridge: bindings restored; waiting for xAgent to reopen their channels", "channels", len(ids))
	}
	return b, nil
}

// Handler is the Connector's http.Handler: serve it at the base URL.
func (b *Bridge) Handler() http.Handler { return b.handler }

// Card returns the Connector Card.
func (b *Bridge) Card() *protocol.Card { return b.card }

// Close stops the sync loops, the data plane (every connection and
// Channel; pending messages stay in the store), the display timers and
// the state store.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	err := b.server.Close()
	_ = b.target.Close()
	b.platform.Close()
	if b.bolt != nil {
		err = errors.Join(err, b.bolt.Close())
	}
	return err
}

// channelOpen serves ServerConfig.OnChannelOpen: a bound channel that
// xAgent (re)opens — after a restart too — reads its room.
func (b *Bridge) channelOpen(channelID string) {
	if _, ok := b.platform.Bound(channelID); ok {
		b.startSync(channelID)
	}
}

// channelDrop serves ServerConfig.OnChannelDrop: the channel's
// connector_id stayed offline past the grace, so the channel is
// unregistered with its sign-in (Connector Architecture §3.4, the offline lease).
func (b *Bridge) channelDrop(channelID string) {
	b.stopSync(channelID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bd, ok, err := b.platform.Unbind(ctx, channelID)
	if err != nil {
		b.log.Warn("matrixbridge: binding not removed from the store", "channel", channelID, "err", err)
	}
	b.mu.Lock()
	delete(b.status, channelID)
	delete(b.sessions, channelID)
	b.mu.Unlock()
	if ok {
		if err := b.platform.SignOut(ctx, bd); err != nil {
			b.log.Warn("matrixbridge: device not logged out", "channel", channelID, "err", err)
		}
	}
}

// describe serves ServerConfig.Describe: connected while bound, else the
// reason the binding stopped, else created. Only redacted names appear.
func (b *Bridge) describe(_ context.Context, channelID string) dataplane.ChannelInfo {
	b.mu.Lock()
	st := b.status[channelID]
	b.mu.Unlock()
	bd, ok := b.platform.Bound(channelID)
	switch {
	case ok && st != "":
		return dataplane.ChannelInfo{Status: st, DisplayName: "Matrix room", AccountHint: redactUser(bd.UserID)}
	case ok:
		return dataplane.ChannelInfo{Status: protocol.StatusConnected, DisplayName: "Matrix room", AccountHint: redactUser(bd.UserID)}
	}
	return dataplane.ChannelInfo{Status: protocol.StatusCreated, DisplayName: "Matrix (not bound)"}
}

// redactUser keeps the first two characters of the localpart and the
// server name: "@alice:example.org" → "@al***:example.org".
func redactUser(userID string) string {
	local, server, ok := strings.Cut(strings.TrimPrefix(userID, "@"), ":")
	if !ok {
		return "***"
	}
	if len(local) > 2 {
		local = local[:2]
	}
	return "@" + local + "***:" + server
}

// startSync starts reading the channel's room, unless a loop already runs.
func (b *Bridge) startSync(channelID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.syncs[channelID] != nil {
		return
	}
	ctx, cancel := context.WithCancel(b.ctx)
	l := &syncLoop{cancel: cancel, done: make(chan struct{})}
	b.syncs[channelID] = l
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer close(l.done)
		defer cancel()
		err := b.platform.RunSync(ctx, channelID, SyncEvents{Deliver: b.deliver, Gone: b.gone})
		b.mu.Lock()
		if b.syncs[channelID] == l {
			delete(b.syncs, channelID)
		}
		b.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			b.log.Warn("matrixbridge: room reading stopped", "channel", channelID, "err", err)
		}
	}()
}

// stopSync stops the channel's loop and waits for it.
func (b *Bridge) stopSync(channelID string) {
	b.mu.Lock()
	l := b.syncs[channelID]
	delete(b.syncs, channelID)
	b.mu.Unlock()
	if l != nil {
		l.cancel()
		<-l.done
	}
}

// errNotOpen makes the sync loop retry a batch until the channel exists.
var errNotOpen = imv2.Retryable(errors.New("matrixbridge: channel not open yet"))

// deliver hands a user message to the channel's Channel: pending until
// xAgent acks it, resent across reconnects (S1, S2).
func (b *Bridge) deliver(ctx context.Context, channelID string, m imv2.ChatMessage) error {
	ch := b.server.Channel(channelID)
	if ch == nil {
		return errNotOpen
	}
	_, err := ch.Send(ctx, m)
	return err
}

// gone records that a binding stopped working and tells xAgent (W7).
func (b *Bridge) gone(channelID, status string) {
	b.mu.Lock()
	b.status[channelID] = status
	b.mu.Unlock()
	if err := b.server.Push(b.ctx, channelID); err != nil {
		b.log.Debug("matrixbridge: descriptor push not sent", "channel", channelID, "err", err)
	}
}

// Start serves auth.start of the form flow: sign in, join the room, bind
// the channel and start reading the room. A refusal the user can fix is
// status failed with its reason; the token never leaves the Connector.
func (b *Bridge) Start(ctx context.Context, channelID string, req protocol.AuthStart) (*protocol.AuthAck, error) {
	b.authMu.Lock()
	defer b.authMu.Unlock()
	sid := "auth_" + uuid.NewString()
	failed := func(msg string) (*protocol.AuthAck, error) {
		return &protocol.AuthAck{FlowID: req.FlowID, AuthSessionID: sid, Status: protocol.AuthFailed, Message: msg}, nil
	}
	form, err := ParseForm(req.Input)
	var se *SignInError
	if errors.As(err, &se) {
		return failed(se.Reason)
	}
	if err != nil {
		return nil, err
	}
	bd, err := b.platform.SignIn(ctx, channelID, form)
	if errors.As(err, &se) {
		return failed(se.Reason)
	}
	if err != nil {
		b.log.Warn("matrixbridge: sign-in failed", "channel", channelID, "err", err)
		return failed("the homeserver could not be reached; try again")
	}
	b.stopSync(channelID)
	if old, ok := b.platform.Bound(channelID); ok && old.AccessToken != bd.AccessToken {
		if err := b.platform.SignOut(ctx, old); err != nil {
			b.log.Warn("matrixbridge: old device not logged out", "channel", channelID, "err", err)
		}
	}
	if err := b.platform.Bind(ctx, bd); err != nil {
		_ = b.platform.SignOut(context.WithoutCancel(ctx), bd)
		return nil, err
	}
	b.mu.Lock()
	delete(b.status, channelID)
	b.sessions[channelID] = sid
	b.mu.Unlock()
	b.startSync(channelID)
	return &protocol.AuthAck{FlowID: req.FlowID, AuthSessionID: sid, Status: protocol.AuthAuthenticated, Message: "Bound to the Matrix room"}, nil
}

// Status serves auth.status: the form flow finishes within auth.start, so
// this reports the channel's state.
func (b *Bridge) Status(_ context.Context, channelID string, req protocol.AuthStatusRequest) (*protocol.AuthAck, error) {
	b.mu.Lock()
	sid, st := b.sessions[channelID], b.status[channelID]
	b.mu.Unlock()
	if req.AuthSessionID != "" && req.AuthSessionID != sid {
		return nil, imv2.Errorf(protocol.CodeAuthSessionNotFound, "unknown auth_session_id")
	}
	ack := &protocol.AuthAck{FlowID: FlowID, AuthSessionID: req.AuthSessionID, Status: protocol.AuthUnauthenticated}
	if _, ok := b.platform.Bound(channelID); ok {
		ack.Status = protocol.AuthAuthenticated
		if st == protocol.StatusExpired {
			ack.Status = protocol.AuthExpired
		}
	}
	return ack, nil
}

// Cancel serves auth.cancel: nothing is ever left unfinished.
func (b *Bridge) Cancel(_ context.Context, channelID string, req protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	if _, ok := b.platform.Bound(channelID); ok {
		return &protocol.AuthCancelAck{Status: "ignored", AuthStatus: protocol.AuthAuthenticated, Message: "already signed in"}, nil
	}
	return &protocol.AuthCancelAck{Status: "not_found", AuthStatus: protocol.AuthUnauthenticated}, nil
}

// Logout serves auth.logout: stop reading the room, forget the binding and
// log out the device the Connector created. The channel stays open.
func (b *Bridge) Logout(ctx context.Context, channelID string) (*protocol.StatusOK, error) {
	b.authMu.Lock()
	defer b.authMu.Unlock()
	b.stopSync(channelID)
	bd, ok, err := b.platform.Unbind(ctx, channelID)
	if err != nil {
		b.log.Warn("matrixbridge: binding not removed from the store", "channel", channelID, "err", err)
	}
	b.mu.Lock()
	delete(b.status, channelID)
	delete(b.sessions, channelID)
	b.mu.Unlock()
	if ok {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.platform.SignOut(sctx, bd); err != nil {
			b.log.Warn("matrixbridge: device not logged out", "channel", channelID, "err", err)
		}
	}
	return &protocol.StatusOK{Status: "ok"}, nil
}
