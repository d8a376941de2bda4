package matrixbridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
	"maunium.net/go/mautrix/id"
)

// Defaults of Config.
const (
	// DefaultTypingTimeout is sent with each typing notification; the kit
	// refreshes typing every Display.TypingRefresh (default 4 s).
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
	// MetricsToken, when set, is what a scraper sends as "Authorization:
	// Bearer TOKEN" for /metrics (connector.Advanced.MetricsToken). The
	// API key never opens /metrics: without a token, serve it on an
	// address of its own (connector.Connector.StartMonitor).
	MetricsToken string
	// StateDir keeps the kit's state in imv2.db (mode 0600: the bindings'
	// Data holds access tokens): channel IDs, bindings with their Account,
	// pending and completed messages, so a restart loses no user message
	// and posts no final twice (S8). Empty keeps everything in memory.
	StateDir string
	// Files stores uploads and offered media; default in memory.
	Files connector.FileStore
	// Display tunes the edit strategy (Interval, TypingRefresh …).
	Display connector.Display
	// Channel tunes every Channel (AckTimeout …).
	Channel imv2.Options
	// HTTPClient talks to homeservers; default one of DefaultHTTPTimeout.
	// Media downloads use a guarded copy of it (xfiles.GuardedClient):
	// public addresses only, every redirect hop included, never a proxy
	// (the environment's included); its transport must be nil or an
	// *http.Transport.
	HTTPClient *http.Client
	// PrivateHomeservers lets media downloads reach a homeserver on a
	// loopback or private address (one on the same machine or network).
	// A homeserver's URL comes from a sign-in: by default one that
	// resolves to 127.0.0.1 or 169.254.169.254 gets no media request.
	PrivateHomeservers bool
	TypingTimeout      time.Duration
	UploadCache        int
	SyncTimeout        time.Duration
	// Logger; default discards. Tokens and message text are never logged.
	Logger *slog.Logger
	Clock  clock.Clock
}

// Bridge is the Matrix Connector: the connector kit's Connector around a
// Platform of Matrix rooms, one bound room per channel, read with /sync.
type Bridge struct {
	cfg     Config
	kit     *connector.Connector
	bolt    *boltstore.Store
	http    *http.Client
	log     *slog.Logger
	uploads *lru.Cache[string, id.ContentURI]
}

// Account is the Matrix side of a channel's binding, kept as JSON in its
// state.Binding.Data (the binding's Key is the room ID): the account
// the Connector acts as and the /sync position. The kit stores it and
// never sends or logs it; the access token is a secret and goes nowhere
// else either.
type Account struct {
	Homeserver  string `json:"homeserver"`
	UserID      string `json:"user_id"`
	DeviceID    string `json:"device_id,omitempty"`
	AccessToken string `json:"access_token"`
	// OwnDevice: the Connector created the device by a password login, so
	// a sign-out logs it out; a pasted token is never invalidated.
	OwnDevice bool `json:"own_device,omitempty"`
	// Since is the next_batch of the last /sync whose messages were all
	// handed to the kit; the next /sync starts there.
	Since string `json:"since,omitempty"`
}

// AccountOf reads the Account of a binding's Data.
func AccountOf(data []byte) (Account, error) {
	var a Account
	if err := json.Unmarshal(data, &a); err != nil || a.AccessToken == "" {
		e := imv2.Errorf(protocol.CodeConnectionNotAuthenticated, "matrixbridge: channel is not bound to a Matrix room")
		return Account{}, imv2.Refused(e)
	}
	return a, nil
}

// Data is a's JSON, for state.Binding.Data.
func (a Account) Data() []byte {
	data, _ := json.Marshal(a) // strings and a bool: never fails
	return data
}

// New builds a Bridge with the bindings found in StateDir. Serve Handler()
// at the Connector's base URL; Close it to stop.
func New(cfg Config) (*Bridge, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("matrixbridge: Config.APIKey is required")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	cfg.Clock = cmp.Or[clock.Clock](cfg.Clock, clock.System{})
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{Timeout: DefaultHTTPTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()})
	cfg.TypingTimeout, cfg.SyncTimeout = cmp.Or(cfg.TypingTimeout, DefaultTypingTimeout), cmp.Or(cfg.SyncTimeout, DefaultSyncTimeout)
	br := &Bridge{cfg: cfg, http: cfg.HTTPClient, log: cfg.Logger}
	br.uploads, _ = lru.New[string, id.ContentURI](cmp.Or(cfg.UploadCache, DefaultUploadCache))
	opts := &connector.Options{APIKey: cfg.APIKey, Skill: []byte(Skill), Files: cfg.Files, Mode: connector.ModeEdit,
		Logger: cfg.Logger, Advanced: connector.Advanced{Display: cfg.Display, Channel: &cfg.Channel, Clock: cfg.Clock, MetricsToken: cfg.MetricsToken}}
	var err error
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
	return br, nil
}

// Handler is the Connector's http.Handler: serve it at the base URL.
func (br *Bridge) Handler() http.Handler { return br.kit }

// Connector returns the kit's Connector, for what the Bridge does not wrap.
func (br *Bridge) Connector() *connector.Connector { return br.kit }

// Close stops the kit (every connection, room reader and Channel; pending
// messages stay in the store) and the state store.
func (br *Bridge) Close() error {
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

// Start implements connector.SignIn for the form flow: sign in, join the
// room and bind the channel to it; the kit then reads it (Listen). A
// refusal the user can fix is status failed with its reason; the token
// never leaves the Connector.
func (br *Bridge) Start(ctx context.Context, channelID string, req protocol.AuthStart) (connector.SignInResult, error) {
	form, err := ParseForm(req.Input)
	var b state.Binding
	if err == nil {
		b, err = br.SignIn(ctx, form)
	}
	var se *connector.SignInError
	if err != nil && !errors.As(err, &se) {
		br.log.Warn("matrixbridge: sign-in failed", "connector_channel_id", channelID, "err", err)
		err = signInErr("the homeserver could not be reached; try again")
	}
	ack := &protocol.AuthAck{Message: "Bound to the Matrix room"}
	return connector.SignInResult{Ack: ack, Bind: &b}, err
}

// Unbound implements connector.Unbinder (auth.logout, a sign-in that
// replaced it or could not be stored, a channel dropped at the end of its
// offline grace): log out the device the Connector created; the kit has
// forgotten the token already.
func (br *Bridge) Unbound(ctx context.Context, b state.Binding) error {
	acc, err := AccountOf(b.Data)
	if err != nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return br.SignOut(sctx, acc)
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
