package connector

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/apikey"
	"github.com/xagentkit/imv2/protocol"
)

// HeaderChannelID names the channel of an upload (T1).
const HeaderChannelID = "X-XAgent-Connector-Channel-ID"

// Defaults of HandlerConfig.
const (
	DefaultMaxUploadBytes  = 32 << 20
	DefaultURLTTL          = time.Hour
	DefaultUploadTimeout   = 5 * time.Minute
	DefaultDownloadTimeout = 5 * time.Minute
	// DefaultMaxConcurrentUploads bounds the upload bodies read at once.
	DefaultMaxConcurrentUploads = 8
)

// HandlerConfig configures a Handler. Card is required; zero fields take the
// defaults listed in the package doc.
type HandlerConfig struct {
	// Card is served at /connector-card.json and feeds /health (H1, H4). It
	// is encoded once at construction; later changes to it are not served.
	Card *protocol.Card
	// Markdown is the primary Skill served at /skill.md; nil means 404 (H3).
	// Its header (YAML front matter) must name the Skill
	// protocol.SkillName(Card.ConnectorCardID) exactly (Card.CheckSkill).
	Markdown []byte
	// APIKey, when set, is required as "Authorization: Bearer <key>" on
	// /health, /ws and /files/uploads. A Card with
	// security.api_key_required=true needs one.
	APIKey string
	// URLKey, when set, is the secret download URLs are signed with (T3):
	// at least MinURLKeyBytes bytes, else NewHandler fails. Unset, the
	// secret is APIKey, so a restarted Connector and its replicas sharing
	// the API key verify each other's URLs without configuration; rotating
	// the API key then invalidates every outstanding URL (a pending user
	// message resent afterwards carries a dead download_url). With neither
	// set, or an APIKey under 22 bytes (a URL's signature would let anyone
	// who sees it guess a short key offline), the key is random per
	// Handler and URLs do not survive a restart. Either way the signing key is HKDF-SHA256 of the secret with
	// info URLKeyInfo, never the secret itself.
	URLKey []byte
	// WS serves /ws after the API key check (W1); nil means 404.
	WS http.Handler
	// Files stores uploads and offered files; default a MemoryFileStore with
	// FileTTL, MaxUploadBytes and Clock.
	Files FileStore
	// MaxUploadBytes caps one uploaded file; default 32 MiB (413 above).
	MaxUploadBytes int64
	// FileTTL is the lifetime of a file in the default store; default 1 h.
	FileTTL time.Duration
	// URLTTL is the lifetime of a URL from DownloadURL; default 1 h.
	URLTTL time.Duration
	// UploadTimeout bounds reading an upload body of the largest size
	// allowed; a smaller body gets a share in proportion to its declared
	// size (Content-Length; a chunked body counts as the largest), at
	// least that of 1 MiB. It sets the slowest upload served, too: the
	// body must keep coming at MaxUploadBytes per UploadTimeout on
	// average (about 110 KiB/s at the defaults) after the 1 MiB share, or
	// it is cut, so a trickle cannot hold an upload slot for long.
	// Default 5 min.
	UploadTimeout time.Duration
	// DownloadTimeout bounds writing one download; default 5 min.
	DownloadTimeout time.Duration
	// MaxConcurrentUploads bounds the upload bodies the Handler reads at
	// once beyond the peers' floors: each peer (a connector_id, see
	// ConnectorOf; a channel of none known) may always have one body read,
	// for up to 64 peers at once, and what peers read beyond that shares
	// these slots; an upload finding neither is answered 503 uploads_busy
	// with Retry-After, before its body is read. So at most
	// 64 + MaxConcurrentUploads bodies are read at once. Default 8.
	MaxConcurrentUploads int
	// ChannelOpen, if set, reports whether a channel is issued and open
	// now; an upload to any other channel is answered 409
	// channel_not_open before its body is read, so channel IDs never
	// issued cannot fill the store. The kit sets it: open on its data
	// plane or, with a Relay, issued in the shared Store (open on another
	// replica, perhaps).
	ChannelOpen func(ctx context.Context, channelID string) bool
	// ConnectorOf, if set, returns the connector_id holding a channel, ""
	// when none is known here. The built-in stores share upload room per
	// connector_id (each guaranteed a floor: MemoryFileStoreOptions), so
	// one peer's uploads cannot hold the room another's need; a channel of
	// no known connector_id is a peer of its own. The kit sets it from its
	// data plane.
	ConnectorOf func(channelID string) string
	// OnUpload, if set, runs after an upload is stored and before it is
	// answered. It receives the optional recipient_ref and reply_token form
	// fields. An error deletes the file and fails the upload with 500.
	OnUpload func(ctx context.Context, u Upload) error
	// Clock reads time for file and URL expiry; default clock.System{}.
	Clock clock.Clock
	// Logger receives request logs (method and path only, never headers or
	// query strings); default discards.
	Logger *slog.Logger
}

// Upload is what HandlerConfig.OnUpload receives about one stored upload.
type Upload struct {
	// ChannelID is the channel the file was uploaded to.
	ChannelID string
	// File is the stored file.
	File         FileInfo
	RecipientRef string // optional target-system recipient reference
	ReplyToken   string // optional reply-target reference, fallback for RecipientRef
}

// Handler is the Connector Server's http.Handler. Build it with NewHandler;
// it is safe for concurrent use and starts no goroutine.
type Handler struct {
	cfg     HandlerConfig
	card    []byte
	health  []byte
	key     apikey.Key
	signer  *signer
	files   FileStore
	uploads *uploadSlots // a slot per upload being read, floors per peer
	maxBody int64
	log     *slog.Logger
	// netNow reads the wall time connection deadlines are set from: they
	// bind the network, so never HandlerConfig.Clock. A test replaces it to see
	// a deadline exactly and to make one pass at once.
	netNow func() time.Time
}

// formOverhead is the room a multipart body gets above MaxUploadBytes for
// boundaries, part headers and the small text fields.
const formOverhead = 64 << 10

// maxFieldBytes caps recipient_ref and reply_token.
const maxFieldBytes = 1024

// NewHandler checks cfg and returns a Handler. It fails on a missing or
// invalid Card (H1), on a Card that requires an API key when cfg.APIKey
// is empty, and on a URLKey shorter than MinURLKeyBytes.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Card == nil {
		return nil, errors.New("connector: HandlerConfig.Card is required")
	}
	if err := cfg.Card.Validate(); err != nil {
		return nil, err
	}
	// /skill.md's header name and the Card's related_skill_ids must match
	// exactly (Common Protocol §4.2): a mismatch fails here, never in front of xAgent.
	if err := cfg.Card.CheckSkill(cfg.Markdown); err != nil {
		return nil, err
	}
	if cfg.Card.Security != nil && cfg.Card.Security.APIKeyRequired && cfg.APIKey == "" {
		return nil, errors.New("connector: the Card sets security.api_key_required but HandlerConfig.APIKey is empty")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.FileTTL <= 0 {
		cfg.FileTTL = DefaultFileTTL
	}
	if cfg.URLTTL <= 0 {
		cfg.URLTTL = DefaultURLTTL
	}
	if cfg.UploadTimeout <= 0 {
		cfg.UploadTimeout = DefaultUploadTimeout
	}
	if cfg.DownloadTimeout <= 0 {
		cfg.DownloadTimeout = DefaultDownloadTimeout
	}
	if cfg.MaxConcurrentUploads <= 0 {
		cfg.MaxConcurrentUploads = DefaultMaxConcurrentUploads
	}
	if cfg.Files == nil {
		cfg.Files = NewMemoryFileStore(MemoryFileStoreOptions{
			Clock:        cfg.Clock,
			TTL:          cfg.FileTTL,
			MaxFileBytes: cfg.MaxUploadBytes,
		})
	}
	card, err := json.Marshal(cfg.Card)
	if err != nil {
		return nil, errors.New("connector: encode Card: " + err.Error())
	}
	// Health is built from the same Card, once, so the two never disagree (H4).
	health, err := json.Marshal(healthBody{
		Status:               "ok",
		ConnectorCardID:      cfg.Card.ConnectorCardID,
		ConnectorCardVersion: cfg.Card.Connector.Version,
		ProtocolVersion:      cfg.Card.ProtocolVersion,
		Build:                cfg.Card.Build,
	})
	if err != nil {
		return nil, errors.New("connector: encode health: " + err.Error())
	}
	signer, err := newSigner(cfg.URLKey, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		cfg:     cfg,
		card:    card,
		health:  health,
		key:     apikey.New(cfg.APIKey).WithClock(cfg.Clock),
		signer:  signer,
		files:   cfg.Files,
		uploads: newUploadSlots(cfg.MaxConcurrentUploads),
		maxBody: cfg.MaxUploadBytes + formOverhead,
		log:     cfg.Logger,
		netNow:  time.Now,
	}
	h.cfg.APIKey, h.cfg.URLKey = "", nil // only the digest and the derived key are kept
	if !h.key.Set() {
		h.log.Warn("connector: no API key configured; /health, /ws and /files/uploads are open")
	}
	return h, nil
}

// SetAPIKey makes key the API key /health, /ws and /files/uploads ask for
// and keeps the current one valid for grace more (dataplane.Server.SetAPIKey
// says why). Download URLs stay signed with the key they were signed with
// at start. A Handler without a key, or an empty key, is an error.
func (h *Handler) SetAPIKey(key string, grace time.Duration) error {
	return h.key.Rotate(key, grace)
}

// healthBody is the exact /health success body (H4).
type healthBody struct {
	Status               string         `json:"status"`
	ConnectorCardID      string         `json:"connector_card_id"`
	ConnectorCardVersion string         `json:"connector_card_version"`
	ProtocolVersion      string         `json:"protocol_version"`
	Build                protocol.Build `json:"build"`
}

// ServeHTTP routes by exact path. It does not use http.ServeMux, whose
// path cleaning would redirect "/files/refs/../x" instead of refusing it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.log.Debug("connector: request", "method", r.Method, "path", r.URL.Path)
	if p := r.URL.Path; p != "/files/uploads" && p != "/ws" {
		dropBody(w, r) // no other endpoint reads a body
	}
	switch p := r.URL.Path; p {
	case "/connector-card.json":
		if h.method(w, r, http.MethodGet) {
			h.writeJSON(w, http.StatusOK, h.card)
		}
	case "/skill.md":
		if !h.method(w, r, http.MethodGet) {
			return
		}
		if h.cfg.Markdown == nil {
			h.fail(w, r, http.StatusNotFound, CodeNotFound, "no skill")
			return
		}
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(h.cfg.Markdown)
	case "/health":
		if h.method(w, r, http.MethodGet) && h.authorized(w, r) {
			h.writeJSON(w, http.StatusOK, h.health)
		}
	case "/ws":
		if !h.authorized(w, r) {
			return
		}
		if h.cfg.WS == nil {
			h.fail(w, r, http.StatusNotFound, CodeNotFound, "no data plane")
			return
		}
		h.cfg.WS.ServeHTTP(w, r)
	case "/files/uploads":
		if h.method(w, r, http.MethodPost) && h.authorized(w, r) {
			h.serveUpload(w, r)
		}
	default:
		// The escaped path, so %2e%2e or %2f stay visible and fail validRef.
		ref, ok := strings.CutPrefix(r.URL.EscapedPath(), "/files/refs/")
		if !ok || !validRef(ref) {
			h.fail(w, r, http.StatusNotFound, CodeNotFound, "not found")
			return
		}
		if h.method(w, r, http.MethodGet) {
			h.serveRef(w, r, ref)
		}
	}
}

// method answers 405 unless r uses want (or HEAD for GET).
func (h *Handler) method(w http.ResponseWriter, r *http.Request, want string) bool {
	if r.Method == want || (want == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	if want == http.MethodGet {
		w.Header().Set("Allow", "GET, HEAD")
	} else {
		w.Header().Set("Allow", want)
	}
	h.fail(w, r, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed")
	return false
}

// authorized answers 401 unless the API key check passes.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.key.Allow(r.Header.Get("Authorization")) {
		markAuthenticated(r.Context())
		return true
	}
	h.log.Info("connector: unauthorized request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("WWW-Authenticate", `Bearer realm="connector"`)
	h.fail(w, r, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong API key")
	return false
}

func (h *Handler) writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorBody mirrors a packet's error member.
type errorBody struct {
	Error struct {
		Code    imv2.Code `json:"code"`
		Message string    `json:"message,omitempty"`
	} `json:"error"`
}

// fail writes a JSON error. msg is a fixed text chosen here, never request
// input, so nothing a client sent (a key, a token) is echoed. An error
// answer never reads the rest of the body (see dropBody).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, code imv2.Code, msg string) {
	dropBody(w, r)
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	body, _ := json.Marshal(b)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.writeJSON(w, status, body)
}

// dropBody makes net/http close the connection after this response instead
// of reading what is left of r's body. net/http would otherwise drain up to
// 256 KiB after the handler returns, even with "Connection: close" (its
// body.Close reads to look for the end), at whatever rate the client
// sends: a body sent a byte at a time held the connection until the read
// timeout. A read deadline lingerDrain from now bounds that drain, and
// "Connection: close" tells the client why the connection goes. The short
// linger is not generosity: a client still sending a small body whose
// connection is closed with its bytes unread gets a TCP reset instead of
// our answer (RFC 9112 §9.6), so the few bytes a prompt client has in
// flight are read, while a slow one is cut after lingerDrain. A request
// without a body keeps its keep-alive connection.
func dropBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	if r.ProtoMajor == 1 { // HTTP/2 has no Connection header; the deadline ends the stream
		w.Header().Set("Connection", "close")
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(lingerDrain))
}

// lingerDrain bounds how long a refused request's body is still read
// (at most the 256 KiB net/http drains) before its connection is closed.
const lingerDrain = 250 * time.Millisecond
