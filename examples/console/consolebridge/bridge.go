// Package consolebridge is an IM Connector whose "IM platform" is the
// terminal: user messages are lines read from an io.Reader, assistant
// output is printed. It is the reference Connector of the SDK — the code
// to copy when bridging a real platform — and what the quickstart and the
// conformance suite drive. Package main in the folder above wraps it in
// the command-line contract of examples/console.
package consolebridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/display"
	"github.com/xagentkit/imv2/protocol"
)

// CardID is the console Connector's connector_card_id.
const CardID = "im.console"

// ToolSend is the console's one tool.
const ToolSend = "console_message_send"

// Config configures a Bridge. Zero values take the command's defaults.
type Config struct {
	// Addr is the listen address; "127.0.0.1:0" picks a free port.
	Addr string
	// APIKey, when set, guards /ws, /health and /files/uploads.
	APIKey string
	// Mode is the delta display: display.Stream, display.Edit or display.Buffer.
	Mode display.Mode
	// JSON prints every target side effect as one JSON object per line.
	JSON bool
	// AckTimeout is how long to wait for xAgent's ack before resending a
	// user message (default 10 s).
	AckTimeout time.Duration
	// StoreDir keeps pending and completed state durably there; "" keeps
	// it in memory.
	StoreDir string
	// Out receives the chat (stdout); Logger the diagnostics.
	Out    io.Writer
	Logger *slog.Logger
}

// Card returns the console Connector's Card.
func Card() *protocol.Card {
	schema, err := protocol.ToolInputSchema(map[string]json.RawMessage{
		"text": json.RawMessage(`{"type":"string","description":"Text to print on the console."}`),
	}, "text")
	if err != nil {
		panic(err) // a constant schema: cannot fail
	}
	return &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "0.1.0", BuildTime: "2026-11-30T00:00:00Z"},
		ConnectorCardID: CardID,
		Connector:       protocol.CardInfo{Name: "Console Connector", Version: "0.1.0", Description: "An IM Connector whose chat is the terminal."},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "console", Label: "Console"}},
			Profiles:    []string{imv2.ProfileIMv2},
		},
		Tools: []protocol.Tool{{
			ToolID: ToolSend, Profile: imv2.ProfileIMv2, Title: "Print a message on the console",
			InputSchema: schema,
		}},
	}
}

// Bridge is a running console Connector.
type Bridge struct {
	cfg     Config
	print   *printer
	display *display.Target
	server  *dataplane.Server
	handler *connector.Handler
	http    *http.Server
	ln      net.Listener
	store   *boltstore.Store

	mu      sync.Mutex
	current string        // newest open channel: where typed lines go
	opened  chan struct{} // closed when the first channel opens
	once    sync.Once
	done    chan struct{}
}

// New builds a Bridge; Start makes it listen.
func New(cfg Config) (*Bridge, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8787"
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = 10 * time.Second
	}
	if cfg.Mode == display.Auto {
		cfg.Mode = display.Stream
	}
	b := &Bridge{cfg: cfg, opened: make(chan struct{}), done: make(chan struct{})}
	b.print = &printer{out: cfg.Out, json: cfg.JSON}

	var platform display.Platform
	switch cfg.Mode {
	case display.Stream:
		platform = streamPlatform{b.print}
	case display.Edit:
		platform = editPlatform{b.print}
	default:
		platform = b.print
	}
	t, err := display.New(platform, &display.Options{Mode: cfg.Mode})
	if err != nil {
		return nil, err
	}
	b.display = t

	opts := &imv2.Options{
		AckTimeout:  cfg.AckTimeout,
		Logger:      cfg.Logger,
		OnDelivered: b.delivered,
		OnFailed:    b.failed,
	}
	var registry dataplane.ChannelRegistry
	if cfg.StoreDir != "" {
		if err := os.MkdirAll(cfg.StoreDir, 0o700); err != nil {
			return nil, err
		}
		st, err := boltstore.Open(filepath.Join(cfg.StoreDir, "console.db"), boltstore.Options{})
		if err != nil {
			t.Close()
			return nil, err
		}
		b.store = st
		opts.Pending, opts.Completed = st.Pending(), st.Completed()
		registry = st
	}
	card := Card()
	b.server, err = dataplane.NewServer(dataplane.ServerConfig{
		Card:      card,
		NewTarget: func(string) imv2.Target { return consoleTarget{b.display, b.print, b.handler} },
		Describe: func(context.Context, string) dataplane.ChannelInfo {
			return dataplane.ChannelInfo{Status: protocol.StatusConnected} // no sign-in needed
		},
		Tools:         toolHandler{b.print},
		Options:       opts,
		Logger:        cfg.Logger,
		Registry:      registry,
		OnChannelOpen: b.channelOpened,
	})
	if err != nil {
		b.closeStores()
		return nil, err
	}
	b.handler, err = connector.NewHandler(connector.Config{
		Card: card, APIKey: cfg.APIKey, WS: b.server, Logger: cfg.Logger,
		Markdown: []byte("---\nname: " + protocol.SkillName(CardID) + "\ndescription: Chat with a person at a terminal.\n---\n\n# Console Connector\n\nSends and receives chat messages on a terminal.\n"),
	})
	if err != nil {
		b.server.Close()
		b.closeStores()
		return nil, err
	}
	return b, nil
}

// Start listens on Config.Addr and serves in the background. It returns
// the base URL (http://host:port with the real port).
func (b *Bridge) Start() (string, error) {
	ln, err := net.Listen("tcp", b.cfg.Addr)
	if err != nil {
		return "", err
	}
	b.ln = ln
	b.http = connector.NewServer(ln.Addr().String(), b.handler)
	go func() { _ = b.http.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// Handler returns the Connector's http.Handler (card, health, ws, files).
func (b *Bridge) Handler() http.Handler { return b.handler }

// Server returns the data-plane server.
func (b *Bridge) Server() *dataplane.Server { return b.server }

func (b *Bridge) channelOpened(id string) {
	b.mu.Lock()
	b.current = id
	b.mu.Unlock()
	b.once.Do(func() { close(b.opened) })
}

// channel waits for an open channel and returns the newest.
func (b *Bridge) channel(ctx context.Context) (*imv2.Channel, error) {
	select {
	case <-b.opened:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.mu.Lock()
	id := b.current
	b.mu.Unlock()
	ch := b.server.Channel(id)
	if ch == nil {
		return nil, fmt.Errorf("consolebridge: channel %s is gone", id)
	}
	return ch, nil
}

// Say sends one line as a user message: text, or "/file PATH" for a
// file-only message whose signed download_url points at this Connector.
// It returns the message_id once the message is pending (not yet acked).
func (b *Bridge) Say(ctx context.Context, line string) (string, error) {
	ch, err := b.channel(ctx)
	if err != nil {
		return "", err
	}
	msg := imv2.ChatMessage{Text: line}
	if path, ok := strings.CutPrefix(line, "/file "); ok {
		f, err := b.offer(ctx, ch.ID(), strings.TrimSpace(path))
		if err != nil {
			return "", err
		}
		msg = imv2.ChatMessage{Files: []imv2.File{f}}
	}
	return ch.Send(ctx, msg)
}

func (b *Bridge) offer(ctx context.Context, channelID, path string) (imv2.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return imv2.File{}, err
	}
	defer f.Close()
	mt := mime.TypeByExtension(filepath.Ext(path))
	if mt == "" {
		mt = "application/octet-stream"
	}
	return b.handler.OfferFile(ctx, channelID, filepath.Base(path), mt, f)
}

// Run reads lines from in until EOF or ctx ends, sending each as a user
// message. Errors on one line are logged and the loop goes on.
func (b *Bridge) Run(ctx context.Context, in io.Reader) error {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), imv2.MaxTextBytes)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			if _, err := b.Say(ctx, line); err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				b.cfg.Logger.Warn("message not sent", "err", err)
			}
		}
	}
}

func (b *Bridge) delivered(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
	text := m.Text
	if text == "" && len(m.Files) > 0 {
		text = "/file " + m.Files[0].Filename
	}
	b.print.emit(Event{Event: "sent", MessageID: m.MessageID, Text: strp(text)})
}

func (b *Bridge) failed(_ string, m imv2.ChatMessage, err *imv2.Error) {
	b.print.emit(Event{Event: "failed", MessageID: m.MessageID, Code: string(err.Code)})
}

// Close stops serving and releases the store.
func (b *Bridge) Close() error {
	var err error
	if b.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = b.http.Shutdown(ctx)
		cancel()
	}
	b.server.Close()
	b.display.Close()
	b.closeStores()
	return err
}

func (b *Bridge) closeStores() {
	if b.store != nil {
		b.store.Close()
	}
}

// consoleTarget is the Channel's Target: display strategies for messages
// and drafts, and activity printed with its status and tool name.
//
// The embedded display.Target brings PostsIdempotently and WasPosted, which
// answer for the platform: the console's stdout neither deduplicates nor
// can be asked, so after a crash an interrupted final is reported to xAgent
// as delivery_outcome_unknown rather than shown again.
type consoleTarget struct {
	*display.Target
	p     *printer
	files *connector.Handler
}

var (
	_ imv2.IdempotentTarget = consoleTarget{}
	_ imv2.PostCheckTarget  = consoleTarget{}
)

// PostMessage shows a final once every file it names is one xAgent
// uploaded to this channel first (M7): a platform posts bytes, not refs,
// so a final whose file cannot be opened was not delivered and must not
// be acked accepted (M12). It is rejected for good: resending the same
// ref cannot succeed (A8).
func (c consoleTarget) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	for _, f := range m.Files {
		rc, _, err := c.files.OpenFile(ctx, channelID, f.FileRef)
		switch {
		case errors.Is(err, connector.ErrFileNotFound), errors.Is(err, connector.ErrWrongChannel):
			return imv2.Permanent(fmt.Errorf("file_ref %q was not uploaded to this channel (M7)", f.FileRef))
		case err != nil:
			return imv2.Retryable(err)
		}
		rc.Close()
	}
	return c.Target.PostMessage(ctx, channelID, m)
}

// SetActivity prints typing for thinking/tool and clears it on idle (the
// Channel sends idle on a final, the first delta and the local timeout).
func (c consoleTarget) SetActivity(_ context.Context, _ string, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityIdle {
		c.p.mu.Lock()
		was := c.p.typing
		c.p.typing = false
		c.p.mu.Unlock()
		if was {
			c.p.emit(Event{Event: "typing_clear"})
		}
		return nil
	}
	c.p.mu.Lock()
	c.p.typing = true
	c.p.mu.Unlock()
	c.p.emit(Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	return nil
}

// toolHandler serves console_message_send.
type toolHandler struct{ p *printer }

func (t toolHandler) Invoke(_ context.Context, channelID string, req protocol.ToolInvoke) (json.RawMessage, error) {
	if req.ToolID != ToolSend {
		return nil, imv2.Errorf(protocol.CodeToolInvokeFailed, "unknown tool %q", req.ToolID)
	}
	var args struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil || args.Text == "" {
		return nil, imv2.Errorf(protocol.CodeToolInvokeFailed, "text required")
	}
	id := imv2.NewMessageID()
	t.p.emit(finalEvent(&imv2.ChatMessage{MessageID: id, Text: args.Text}))
	return json.RawMessage(fmt.Sprintf(`{"status":"sent","message_id":%q}`, id)), nil
}
