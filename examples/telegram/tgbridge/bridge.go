// Package tgbridge is the Telegram reference Connector: a bot of the
// Telegram Bot API bridged into xAgent with the Connector kit. It is the
// reference for bridging a bot API (long polling or a webhook, per-chat rate limits
// with retry_after, edit or draft streaming, typing actions, multipart
// file uploads); see README.md.
package tgbridge

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mymmrac/telego"
	ta "github.com/mymmrac/telego/telegoapi"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/xfiles"
)

// Defaults of Config, and Telegram's published limits.
const (
	DefaultServer      = "https://api.telegram.org"
	DefaultPollTimeout = 25 * time.Second
	// PerChat and PerBot are Telegram's limits: about one message a second
	// to a chat, 30 a second over all chats.
	PerChat = 1.0
	PerBot  = 30.0
	// MaxInboundFileBytes is the largest file getFile lets a bot download.
	MaxInboundFileBytes = 20 << 20
	// PairTTL is how long a pairing code waits for its /start; at most
	// MaxPairings wait at once, one per channel.
	PairTTL     = 10 * time.Minute
	MaxPairings = 1024
	// maxAnswerBytes caps a Bot API answer read (100 updates of 4,096
	// characters, escaped, fit), maxUpdateBytes a webhook's one update.
	maxAnswerBytes, maxUpdateBytes = 8 << 20, 1 << 20
)

// Config configures a Bridge. APIKey, Token and Build.BuildTime are
// required; zero fields take the defaults.
type Config struct {
	Build  protocol.Build // identifies the build in the Card and /health (H4)
	APIKey string         // guards /health, /ws and /files/uploads (never /metrics)
	// MetricsToken, when set, is what a scraper sends as "Authorization:
	// Bearer TOKEN" for /metrics (connector.Advanced.MetricsToken); the API
	// key never opens /metrics.
	MetricsToken string
	// Token is the bot's token from BotFather.
	Token string
	// Server is the Bot API server's base URL; default DefaultServer.
	Server string
	// Webhook, when set, is the URL Telegram posts updates to instead of
	// the default long polling: New calls setWebhook with it and a secret
	// of its own, and the Connector serves the URL's path (Telegram asks
	// for HTTPS on port 443, 80, 88 or 8443: put TLS in front). Without
	// it New calls deleteWebhook, as getUpdates fails while one is set.
	Webhook string
	// Chat, when set, binds every channel to this chat ID. Else a channel
	// is bound by pairing (PairFlow): its code sent with /start in a chat.
	Chat string
	// PublicURL is the Connector's base URL as users reach it: the prefix
	// of a file's signed download link where the server takes no files.
	PublicURL string
	// StateDir keeps the kit's state in imv2.db (bindings, draft handles,
	// pending and completed messages), so a restart loses no user message
	// and shows no final twice. Empty keeps it in memory.
	StateDir string
	Files    connector.FileStore // uploads and offered files; default in memory
	// Mode is how a streamed reply shows; default chosen at New: ModeStream
	// (sendMessageDraft) where the server has it, else ModeEdit.
	Mode connector.Mode
	// Display tunes the strategies; default Interval 1 s (one edit a second).
	Display connector.Display
	// Pace limits the calls; default PerChat and PerBot (PerChat not in
	// ModeStream, whose drafts are not messages).
	Pace        connector.Pace
	Channel     imv2.Options  // tunes every Channel (AckTimeout …)
	HTTPClient  *http.Client  // Bot API calls and file downloads; default keeps 128 idle connections
	PollTimeout time.Duration // getUpdates long poll; default DefaultPollTimeout
	Logger      *slog.Logger  // default discards; tokens and texts are never logged
	Clock       clock.Clock
}

// Bridge is the Telegram Connector: the kit around one bot, each channel
// bound to one chat (private or group).
type Bridge struct {
	cfg    Config
	bot    *telego.Bot
	me     string // the bot's username
	kit    *connector.Connector
	bolt   *boltstore.Store
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when poll ended
	secret string        // the webhook's X-Telegram-Bot-Api-Secret-Token

	noTyping, noFiles atomic.Bool // the server answered "not supported"

	mu    sync.Mutex
	codes map[string]pairing // pairing codes waiting for their /start
}

type pairing struct {
	channel string
	expires time.Time
}

// New checks the token (getMe), sets the webhook (Config.Webhook) or
// deletes it, picks the mode, builds the kit and starts the getUpdates
// loop (not with a webhook). Serve Connector() at the Connector's base
// URL; Close it to stop.
func New(cfg Config) (*Bridge, error) {
	if _, err := strconv.ParseInt(cmp.Or(cfg.Chat, "0"), 10, 64); cfg.APIKey == "" || cfg.Token == "" || err != nil {
		return nil, errors.New("tgbridge: Config.APIKey and Config.Token are required, and Config.Chat is a chat ID")
	}
	cfg.Server = strings.TrimRight(cmp.Or(cfg.Server, DefaultServer), "/")
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	cfg.Clock = cmp.Or[clock.Clock](cfg.Clock, clock.System{})
	if cfg.HTTPClient == nil { // every chat's calls go to one host: keep a connection per chat busy at once
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 128
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	cfg.PollTimeout = cmp.Or(cfg.PollTimeout, DefaultPollTimeout)
	cfg.Display.Interval = cmp.Or(cfg.Display.Interval, time.Second)
	bot, err := telego.NewBot(cfg.Token, telego.WithAPIServer(cfg.Server), telego.WithAPICaller(caller{cfg.HTTPClient, cfg.Token}), telego.WithDiscardLogger())
	if err != nil {
		return nil, fmt.Errorf("tgbridge: %w", err)
	}
	br := &Bridge{cfg: cfg, bot: bot, done: make(chan struct{}), codes: map[string]pairing{}}
	br.ctx, br.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(br.ctx, time.Minute)
	defer cancel()
	me, err := bot.GetMe(ctx)
	if err == nil && cfg.Webhook != "" { // max_connections 1: one update at a time, in order, as poll hands them over
		br.secret = rand.Text()
		err = bot.SetWebhook(ctx, &telego.SetWebhookParams{URL: cfg.Webhook, SecretToken: br.secret, MaxConnections: 1, AllowedUpdates: []string{"message"}})
	} else if err == nil {
		err = bot.DeleteWebhook(ctx, nil) // getUpdates fails while a webhook is set
	}
	if err == nil && cfg.Mode == connector.ModeAuto {
		// sendMessageDraft to no chat: "chat not found" says the server has
		// the method, "not supported" (or 404) says it has not.
		derr := bot.SendMessageDraft(ctx, &telego.SendMessageDraftParams{ChatID: 0, DraftID: 1, Text: "…"})
		if _, api := apiError(derr); derr != nil && !api {
			err = derr
		}
		cfg.Mode = connector.ModeStream
		if unsupported(derr) {
			cfg.Mode = connector.ModeEdit
		}
	}
	if err != nil {
		br.cancel()
		return nil, fmt.Errorf("tgbridge: %s", br.redact(err))
	}
	br.me = me.Username
	if cfg.Pace == (connector.Pace{}) {
		cfg.Pace = connector.Pace{PerConversation: PerChat, PerPlatform: PerBot}
		if cfg.Mode == connector.ModeStream {
			cfg.Pace.PerConversation = 0
		}
	}
	br.cfg = cfg
	opts := &connector.Options{APIKey: cfg.APIKey, Skill: []byte(Skill), Files: cfg.Files, Mode: cfg.Mode,
		Logger: cfg.Logger, Pace: cfg.Pace,
		Advanced: connector.Advanced{Display: cfg.Display, Channel: &cfg.Channel, Clock: cfg.Clock, MetricsToken: cfg.MetricsToken}}
	if cfg.Chat != "" {
		opts.DefaultConversation = func(string) string { return cfg.Chat }
	}
	if hook, err := neturl.Parse(cfg.Webhook); cfg.Webhook != "" && err == nil { // setWebhook took it: it is a URL
		opts.Advanced.Routes = map[string]http.Handler{cmp.Or(hook.Path, "/"): http.HandlerFunc(br.serveUpdate)}
	}
	if cfg.StateDir != "" {
		if err = os.MkdirAll(cfg.StateDir, 0o700); err == nil {
			br.bolt, err = boltstore.Open(filepath.Join(cfg.StateDir, "imv2.db"), boltstore.Options{Clock: cfg.Clock})
			opts.Store = br.bolt
		}
	}
	if err == nil {
		br.kit, err = connector.New(NewCard(cfg.Build, cfg.Chat == ""), br, opts)
	}
	if err != nil {
		br.Close()
		return nil, err
	}
	go br.poll()
	return br, nil
}

// Connector returns the kit's Connector: the http.Handler to serve at the
// base URL (the webhook's route too), and what the Bridge does not wrap.
func (br *Bridge) Connector() *connector.Connector { return br.kit }

// Mode is the display strategy New chose.
func (br *Bridge) Mode() connector.Mode { return br.cfg.Mode }

// Close stops the kit (connections, Channels; pending messages stay in
// the store), the getUpdates loop and the state store.
func (br *Bridge) Close() error {
	br.cancel()
	var err error
	if br.kit != nil { // else poll never started
		err = br.kit.Close()
		<-br.done
	}
	if br.bolt != nil {
		err = errors.Join(err, br.bolt.Close())
	}
	br.cfg.HTTPClient.CloseIdleConnections()
	return err
}

// poll reads updates with getUpdates and hands each to the kit in order.
// An update is confirmed (the next call's offset) only after the kit
// stored it, so a crash loses none: Telegram sends it again (handle).
func (br *Bridge) poll() {
	defer close(br.done)
	offset, wait := 0, time.Duration(0)
	for br.cfg.Webhook == "" && br.sleep(br.ctx, wait) == nil { // a webhook's updates come to serveUpdate
		ctx, cancel := context.WithTimeout(br.ctx, br.cfg.PollTimeout+30*time.Second)
		ups, err := br.bot.GetUpdates(ctx, &telego.GetUpdatesParams{Offset: offset, Limit: 100,
			Timeout: int(br.cfg.PollTimeout / time.Second), AllowedUpdates: []string{"message"}})
		cancel()
		wait = min(max(2*wait, 100*time.Millisecond), 5*time.Second)
		if err != nil && br.ctx.Err() == nil { // no updates: the wait grows
			br.cfg.Logger.Warn("tgbridge: getUpdates failed", "err", br.redact(err), "retry_in", wait)
		}
		if len(ups) > 0 {
			wait = 0
		}
		for _, u := range ups {
			if !br.handle(br.ctx, u) {
				wait = time.Second
				break
			}
			offset = u.UpdateID + 1
		}
	}
}

// serveUpdate is the webhook's route (Config.Webhook): Telegram posts one
// update with the secret setWebhook gave it (compared in constant time).
// 200 says the kit has it; any other answer has Telegram send it again,
// which the kit skips if it has it, as after poll's crash.
func (br *Bridge) serveUpdate(w http.ResponseWriter, r *http.Request) {
	var u telego.Update
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Telegram-Bot-Api-Secret-Token")), []byte(br.secret)) != 1 {
		http.Error(w, "wrong secret token", http.StatusUnauthorized)
	} else if r.Method != http.MethodPost || json.NewDecoder(http.MaxBytesReader(w, r.Body, maxUpdateBytes)).Decode(&u) != nil {
		http.Error(w, "not an update", http.StatusBadRequest)
	} else if !br.handle(r.Context(), u) {
		http.Error(w, "not taken; send it again", http.StatusServiceUnavailable)
	}
}

// startCode matches a pairing: /start CODE, or /start@bot CODE in a group.
var startCode = regexp.MustCompile(`^/start(?:@\w+)?\s+([A-Za-z0-9_-]{8,64})$`)

// handle hands one update to the kit: a pairing binds its chat, any other
// message of a person goes to the channels bound to its chat. It reports
// whether u is done with: handed over, or skipped (nothing to forward, not
// for a channel, refused for good); else it is worth another try (handing
// it over again is safe: the kit dedups it by its message_id, which comes
// from the update_id).
func (br *Bridge) handle(ctx context.Context, u telego.Update) bool {
	m := u.Message
	if m == nil || (m.From != nil && m.From.IsBot) {
		return true
	}
	key := strconv.FormatInt(m.Chat.ID, 10)
	if c := startCode.FindStringSubmatch(strings.TrimSpace(m.Text)); c != nil && br.pair(ctx, c[1], key, m.Chat) {
		return true
	}
	ev := connector.InboundEvent{Conversation: key, EventID: strconv.Itoa(u.UpdateID), Text: cmp.Or(m.Text, m.Caption)}
	id, name, mime, size := "", "", "", int64(0)
	if d := m.Document; d != nil {
		id, name, mime, size = d.FileID, d.FileName, d.MimeType, d.FileSize
	} else if n := len(m.Photo); n > 0 { // the largest size comes last
		id, name, mime, size = m.Photo[n-1].FileID, "photo.jpg", "image/jpeg", int64(m.Photo[n-1].FileSize)
	}
	if id != "" { // getFile, then the bytes through xfiles' guard: no internal address but the Bot
		// API server's, at most the smaller of getFile's 20 MB and the kit's upload cap
		f, err := br.bot.GetFile(ctx, &telego.GetFileParams{FileID: id})
		var data []byte
		if err == nil {
			q := xfiles.FetchRequest{BaseURL: br.cfg.Server, MaxBytes: min(br.kit.MaxFileBytes(), MaxInboundFileBytes),
				File: imv2.File{DownloadURL: br.bot.FileDownloadURL(f.FilePath), ByteSize: max(size, f.FileSize)}}
			data, err = q.Do(ctx, br.cfg.HTTPClient)
		}
		if err != nil {
			br.cfg.Logger.Info("tgbridge: a user's file was not downloaded", "err", br.redact(err))
			ev.Text = cmp.Or(ev.Text, "(a file that could not be downloaded: "+name+")")
		} else {
			ev.Files = []connector.InboundFile{{Filename: name, MimeType: mime,
				Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}}
		}
	}
	if ev.Text == "" && len(ev.Files) == 0 {
		return true // a sticker, a poll, a member joining: nothing to forward
	}
	if err := br.kit.Receive(ctx, ev); err != nil && retryUpdate(err) {
		br.cfg.Logger.Warn("tgbridge: update not handed over; tried again", "update_id", u.UpdateID, "err", br.redact(err))
		return false
	} else if err != nil {
		br.cfg.Logger.Debug("tgbridge: update skipped", "update_id", u.UpdateID, "err", br.redact(err))
	}
	return true
}

// redact keeps the token (part of a file's URL) out of the log.
func (br *Bridge) redact(err error) string {
	return strings.ReplaceAll(err.Error(), br.cfg.Token, "<token>")
}

// Start implements connector.SignIn for PairFlow: it hands out a code
// that binds the channel to the chat where it is sent with /start (a
// t.me deep link carries it). At most MaxPairings wait, each PairTTL.
func (br *Bridge) Start(_ context.Context, channelID string, _ protocol.AuthStart) (connector.SignInResult, error) {
	code := rand.Text()
	now := br.cfg.Clock.Now()
	br.mu.Lock()
	defer br.mu.Unlock()
	for c, p := range br.codes {
		if p.channel == channelID || now.After(p.expires) {
			delete(br.codes, c)
		}
	}
	if len(br.codes) >= MaxPairings {
		return connector.SignInResult{}, &connector.SignInError{Reason: "too many chats are being connected; try again in a few minutes"}
	}
	br.codes[code] = pairing{channel: channelID, expires: now.Add(PairTTL)}
	return connector.SignInResult{Ack: &protocol.AuthAck{Status: protocol.AuthPending, AuthSessionID: "pair_" + code[:8],
		QRCodeText: "https://t.me/" + br.me + "?start=" + code, ExpiresAt: now.Add(PairTTL).Unix(), PollIntervalMillis: 2000,
		Message: fmt.Sprintf("Send /start %s to @%s in the chat to connect (in a group: /start@%s %s).", code, br.me, br.me, code)}}, nil
}

// Status implements connector.SignInStatus: pending while the channel's
// code waits, authenticated once bound, expired after PairTTL.
func (br *Bridge) Status(ctx context.Context, channelID string, _ protocol.AuthStatusRequest) (connector.SignInResult, error) {
	now := br.cfg.Clock.Now()
	br.mu.Lock()
	for _, p := range br.codes {
		if p.channel == channelID && now.Before(p.expires) {
			br.mu.Unlock()
			return connector.SignInResult{Ack: &protocol.AuthAck{Status: protocol.AuthPending, PollIntervalMillis: 2000}}, nil
		}
	}
	br.mu.Unlock()
	if b, ok, err := br.kit.Binding(ctx, channelID); err != nil || (ok && b.State == state.BindingConnected) {
		return connector.SignInResult{Ack: &protocol.AuthAck{Status: protocol.AuthAuthenticated}}, err
	}
	return connector.SignInResult{Ack: &protocol.AuthAck{Status: protocol.AuthExpired, Message: "the code expired; start again"}}, nil
}

// pair binds the channel whose code was sent to the chat, and says so
// there; an unknown or expired code is an ordinary message.
func (br *Bridge) pair(ctx context.Context, code, key string, chat telego.Chat) bool {
	br.mu.Lock()
	p, ok := br.codes[code]
	delete(br.codes, code)
	br.mu.Unlock()
	if !ok || br.cfg.Clock.Now().After(p.expires) {
		return false
	}
	name := cmp.Or(chat.Title, strings.TrimSpace(chat.FirstName+" "+chat.LastName), chat.Username, key)
	err := br.kit.Bind(ctx, state.Binding{ChannelID: p.channel, Key: key,
		Target: protocol.DescriptorTarget{Provider: "telegram", Label: "Telegram", DisplayName: name}})
	text := "Connected to xAgent."
	if err != nil {
		br.cfg.Logger.Warn("tgbridge: pairing not stored", "channel", p.channel, "err", br.redact(err))
		text = "Not connected (the Connector could not store it); start again."
	}
	_, _ = br.bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: chat.ID}, Text: text})
	return true
}

// sleep waits d on the Config's clock, or until ctx ends.
func (br *Bridge) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 { // no timer: a fake clock fires none of 0 by itself
		return ctx.Err()
	}
	done := make(chan struct{})
	defer br.cfg.Clock.AfterFunc(d, func() { close(done) }).Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// caller is telego's HTTP caller with every answer read as the Bot API
// error it stands for: a body that is no Bot API answer (a proxy's 502,
// telegram-test-api's "not supported") becomes an Error with its status,
// so unsupported and mark can tell them apart. A transport error names
// the URL without the token, which is in its path: the kit logs errors.
type caller struct {
	c     *http.Client
	token string
}

func (h caller) Call(ctx context.Context, url string, data *ta.RequestData) (*ta.Response, error) {
	body := data.BodyStream
	if data.BodyRaw != nil {
		if string(data.BodyRaw) == "null" { // a method without parameters; strict JSON parsers refuse a bare null
			data.BodyRaw = []byte("{}")
		}
		body = bytes.NewReader(data.BodyRaw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", data.ContentType)
	resp, err := h.c.Do(req)
	if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
		ue.URL = strings.ReplaceAll(ue.URL, h.token, "<token>")
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, err
	}
	var r ta.Response
	if json.Unmarshal(b, &r) == nil && (r.Ok || (r.Error != nil && r.ErrorCode != 0)) {
		return &r, nil
	}
	var other struct{ Message string }
	_ = json.Unmarshal(b, &other)
	return &ta.Response{Error: &ta.Error{ErrorCode: resp.StatusCode, Description: cmp.Or(other.Message, http.StatusText(resp.StatusCode))}}, nil
}
