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
	"cmp"
	"context"
	_ "embed"
	"io"
	"mime"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

// Identity of the console Connector; the rest of its Card is card.json.
const (
	// CardID is the connector_card_id.
	CardID = "im.console"
	// ToolSend is the console's one tool.
	ToolSend = "console_message_send"
)

//go:embed card.json
var cardJSON []byte

// skill is the primary Skill served at /skill.md (H3).
//
//go:embed skill.md
var skill []byte

// Card returns the console Connector's Card (card.json), its build
// member stamped with the module version and VCS revision the binary was
// built from, when recorded (debug.ReadBuildInfo).
func Card() *protocol.Card {
	c, err := protocol.DecodeCard(cardJSON)
	if err != nil {
		panic(err) // an embedded constant, checked by TestCard_H1_AsServedBefore
	}
	info, ok := debug.ReadBuildInfo()
	c.Build = stamped(c.Build, info, ok)
	return c
}

// Config configures a Bridge. Zero values take the command's defaults.
type Config struct {
	// Options are the kit's (connector.New): the API key guarding /ws,
	// /health and /files/uploads, the Mode (ModeStream by default),
	// Advanced.Channel.AckTimeout (how long to wait for xAgent's ack
	// before resending a user message, default 10 s), the Logger and the
	// rest. New sets what the console decides: Tools, Skill, Store (with
	// StoreDir), DefaultConversation, Advanced.OnChannelOpen and the
	// Channel's OnDelivered and OnFailed.
	connector.Options
	// Addr is the listen address (default 127.0.0.1:8787); "127.0.0.1:0"
	// picks a free port.
	Addr string
	// JSON prints every target side effect as one JSON object per line.
	JSON bool
	// StoreDir keeps pending, completed and binding state durably there;
	// "" keeps it in memory.
	StoreDir string
	// Out receives the chat; default stdout.
	Out io.Writer
}

// Bridge is a running console Connector: the kit's Connector around the
// printer, and the newest open channel, where typed lines go.
type Bridge struct {
	*connector.Connector
	cfg     Config
	store   *boltstore.Store
	current atomic.Pointer[string] // the newest open channel
	opened  chan struct{}          // closed when the first channel opens
	once    sync.Once
}

// New builds a Bridge; Start makes it listen.
func New(cfg Config) (*Bridge, error) {
	b := &Bridge{cfg: cfg, opened: make(chan struct{})}
	p := &printer{out: cmp.Or[io.Writer](cfg.Out, os.Stdout), json: cfg.JSON, credit: draftSlack}
	opts, ch := cfg.Options, imv2.Options{}
	if opts.Advanced.Channel != nil {
		ch = *opts.Advanced.Channel
	}
	ch.OnDelivered, ch.OnFailed = p.delivered, p.failed
	opts.Advanced.Channel, opts.Tools, opts.Skill, opts.Advanced.OnChannelOpen = &ch, p, skill, b.channelOpened
	// Each channel is its own conversation; typed lines go to the newest.
	opts.DefaultConversation = func(id string) string { return id }
	if cfg.StoreDir != "" {
		if err := os.MkdirAll(cfg.StoreDir, 0o700); err != nil {
			return nil, err
		}
		st, err := boltstore.Open(filepath.Join(cfg.StoreDir, "console.db"), boltstore.Options{})
		if err != nil {
			return nil, err
		}
		b.store, opts.Store = st, st
	} else if opts.Store == nil {
		// Chosen, so the kit does not warn: the command says it once, naming -store.
		opts.Store = connector.NewMemoryStore(opts.Advanced.Clock)
	}
	var err error
	if b.Connector, err = connector.New(Card(), p, &opts); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Start listens on Config.Addr and serves in the background until Close.
// It returns the base URL (http://host:port with the real port).
func (b *Bridge) Start() (string, error) {
	return b.Connector.Start(cmp.Or(b.cfg.Addr, "127.0.0.1:8787"))
}

func (b *Bridge) channelOpened(id string) {
	b.current.Store(&id)
	b.once.Do(func() { close(b.opened) })
}

// Say sends one line as a user message to the newest open channel, once
// one is open: text, or "/file PATH" for a file-only message whose signed
// download_url points at this Connector. It returns the message_id once
// the message is pending.
func (b *Bridge) Say(ctx context.Context, line string) (string, error) {
	select {
	case <-b.opened:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	ev := connector.InboundEvent{Conversation: *b.current.Load(), EventID: imv2.NewMessageID(), Text: line}
	if path, ok := strings.CutPrefix(line, "/file "); ok {
		path = strings.TrimSpace(path)
		open := func() (io.ReadCloser, error) { return os.Open(path) }
		ev.Text, ev.Files = "", []connector.InboundFile{{Filename: filepath.Base(path), MimeType: mime.TypeByExtension(filepath.Ext(path)), Open: open}}
	}
	return connector.EventMessageID(ev.Conversation, ev.EventID), b.Receive(ctx, ev)
}

// Run reads lines from in until it ends or fails, sending each but blank
// ones as a user message; a line that cannot be sent is logged. ctx is
// checked between lines: a read of in cannot be cancelled, so Run may
// outlive ctx until the next line or the end of in.
func (b *Bridge) Run(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), imv2.MaxTextBytes)
	for sc.Scan() && ctx.Err() == nil {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		if _, err := b.Say(ctx, sc.Text()); err != nil && b.cfg.Logger != nil {
			b.cfg.Logger.Warn("message not sent", "err", err)
		}
	}
	return cmp.Or(sc.Err(), ctx.Err())
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
