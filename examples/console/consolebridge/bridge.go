// Package consolebridge is an IM Connector whose "IM platform" is the
// terminal: user messages are lines read from an io.Reader, assistant
// output is printed. It is the reference Connector of the SDK, built on the
// Connector kit (connector.New): the code to copy when bridging a real
// platform, and what the quickstart and the conformance suite drive.
// Package main in the folder above wraps it in the command-line contract
// of examples/console.
package consolebridge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
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
	// StoreDir keeps pending, completed and binding state durably there;
	// "" keeps it in memory.
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
		Schema: protocol.CardSchema, ProtocolVersion: protocol.ProtocolVersion, ConnectorCardID: CardID,
		Build:     protocol.Build{Version: "0.1.0", BuildTime: "2026-11-30T00:00:00Z"},
		Connector: protocol.CardInfo{Name: "Console Connector", Version: "0.1.0", Description: "An IM Connector whose chat is the terminal."},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "console", Label: "Console"}},
			Profiles:    []string{imv2.ProfileIMv2},
		},
		Tools: []protocol.Tool{{ToolID: ToolSend, Profile: imv2.ProfileIMv2, Title: "Print a message on the console", InputSchema: schema}},
	}
}

// Bridge is a running console Connector: the kit's Connector around the
// printer, and the newest open channel, where typed lines go.
type Bridge struct {
	*connector.Connector
	cfg     Config
	store   *boltstore.Store
	mu      sync.Mutex
	current string
	opened  chan struct{}
	once    sync.Once
}

// New builds a Bridge; Start makes it listen.
func New(cfg Config) (*Bridge, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8787"
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Mode == display.Auto {
		cfg.Mode = display.Stream
	}
	b := &Bridge{cfg: cfg, opened: make(chan struct{})}
	p := &printer{out: cfg.Out, json: cfg.JSON}
	opts := &connector.Options{
		APIKey: cfg.APIKey, Mode: cfg.Mode, Logger: cfg.Logger, Tools: p,
		Skill:   []byte("---\nname: " + protocol.SkillName(CardID) + "\ndescription: Chat with a person at a terminal.\n---\n\n# Console Connector\n\nSends and receives chat messages on a terminal.\n"),
		Channel: &imv2.Options{AckTimeout: cfg.AckTimeout, OnDelivered: p.delivered, OnFailed: p.failed},
		// Each channel is its own conversation; typed lines go to the newest.
		DefaultConversation: func(id string) string { return id },
		OnChannelOpen:       b.channelOpened,
	}
	if cfg.StoreDir != "" {
		if err := os.MkdirAll(cfg.StoreDir, 0o700); err != nil {
			return nil, err
		}
		st, err := boltstore.Open(filepath.Join(cfg.StoreDir, "console.db"), boltstore.Options{})
		if err != nil {
			return nil, err
		}
		b.store, opts.Store = st, st
	}
	var platform connector.Platform = p
	switch cfg.Mode {
	case display.Stream:
		platform = streamPlatform{p}
	case display.Edit:
		platform = editPlatform{p}
	}
	c, err := connector.New(Card(), platform, opts)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.Connector = c
	return b, nil
}

// Start listens on Config.Addr and serves in the background until Close.
// It returns the base URL (http://host:port with the real port).
func (b *Bridge) Start() (string, error) { return b.Connector.Start(b.cfg.Addr) }

func (b *Bridge) channelOpened(id string) {
	b.mu.Lock()
	b.current = id
	b.mu.Unlock()
	b.once.Do(func() { close(b.opened) })
}

// Say sends one line as a user message to the newest open channel: text,
// or "/file PATH" for a file-only message whose signed download_url points
// at this Connector. It returns the message_id once the message is pending.
func (b *Bridge) Say(ctx context.Context, line string) (string, error) {
	select {
	case <-b.opened:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	b.mu.Lock()
	ev := connector.Event{Conversation: b.current, EventID: imv2.NewMessageID(), Text: line}
	b.mu.Unlock()
	if path, ok := strings.CutPrefix(line, "/file "); ok {
		path = strings.TrimSpace(path)
		open := func() (io.ReadCloser, error) { return os.Open(path) }
		ev.Text, ev.Files = "", []connector.InboundFile{{Filename: filepath.Base(path), MimeType: mime.TypeByExtension(filepath.Ext(path)), Open: open}}
	}
	return connector.EventMessageID(ev.Conversation, ev.EventID), b.Receive(ctx, ev)
}

// Run reads lines from in until EOF or ctx ends, sending each as a user
// message. Errors on one line are logged and the loop goes on.
func (b *Bridge) Run(ctx context.Context, in io.Reader) error {
	done := make(chan struct{})
	go func() { // a read of in cannot be cancelled: Run returns at ctx's end without it
		defer close(done)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), imv2.MaxTextBytes)
		for sc.Scan() && ctx.Err() == nil {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			if _, err := b.Say(ctx, sc.Text()); err != nil && b.cfg.Logger != nil {
				b.cfg.Logger.Warn("message not sent", "err", err)
			}
		}
	}()
	select {
	case <-done:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops serving and releases the store.
func (b *Bridge) Close() error {
	var err error
	if b.Connector != nil {
		err = b.Connector.Close()
	}
	if b.store != nil {
		b.store.Close()
	}
	return err
}
