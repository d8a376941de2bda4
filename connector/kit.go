package connector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector/internal/display"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/apikey"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// DefaultConversationKey is the conversation every channel of a Card
// without auth flows is bound to when Options.DefaultConversation is nil.
const DefaultConversationKey = "default"

// ShutdownTimeout bounds how long ListenAndServe and Serve wait for
// requests in flight when their context ends.
const ShutdownTimeout = 5 * time.Second

// Options configure New: the settings most Connectors set, with the rest
// in Advanced. Every field is optional; the zero value is a Connector with
// no API key, in-memory state, the display mode the platform's
// capabilities allow, and no rate limit.
type Options struct {
	// APIKey, when set, guards /health, /ws and /files/uploads (W1); it
	// never opens /metrics (Advanced.MetricsToken). Given once: the kit
	// hands it to every layer. New takes any key; one under 22 bytes
	// (128 bits as base64) never keys download URLs (Advanced.URLKey),
	// and the reference commands refuse it.
	APIKey string
	// Skill is served at /skill.md (H3); nil means 404.
	Skill []byte
	// Store keeps pending, completed, registry and bindings; default all
	// in memory (lost on restart). The caller closes it after Close.
	Store state.Store
	// Files stores uploads and offered files; default a MemoryFileStore.
	// MemoryFileStore and a plain DiskFileStore keep files for one process: with
	// a durable Store, a user message resent after a restart carries a
	// download_url whose file is gone (404) unless Files outlives the
	// process too (DiskFileStoreOptions.Keep; for replicas, a FileStore of
	// your own on shared storage).
	Files FileStore
	// Mode is how a streamed message is shown; default ModeAuto: ModeStream
	// for a Drafter (an Editor too), ModeEdit for an Editor, else
	// ModeBuffer.
	Mode Mode
	// Tools serves the Card's tools (tool.invoke); nil answers
	// unsupported_packet.
	Tools dataplane.ToolHandler
	// DefaultConversation names the conversation a channel is bound to
	// when the Server issues it, for a Card without auth flows (a Card
	// with them binds by sign-in, see SignIn). A channel.open of a
	// channel without a binding binds it again, so an explicit Unbind
	// lasts until the channel's next open (after a reconnect or a
	// restart); a Descriptor push or lookup never binds.
	// Default: every channel to DefaultConversationKey.
	DefaultConversation func(channelID string) string
	// Logger receives diagnostics; default discards.
	Logger *slog.Logger
	// Pace limits and retries platform calls; see Pace for its defaults.
	Pace Pace
	// Advanced holds the settings most Connectors leave at their
	// defaults: display tuning, Channel bounds, replicas, metrics, clock.
	Advanced Advanced
}

// Advanced is the second screen of Options; every field is optional.
type Advanced struct {
	// Display tunes drafts and typing (edit interval, bounds, timeouts);
	// see Display for the defaults.
	Display Display
	// Channel configures every Channel (ack timeout, target timeout, delta
	// bounds, ActivityTimeout — which also clears typing —, OnDelivered,
	// OnFailed); see imv2.Options for the defaults. Its Pending,
	// Completed, Clock and Logger are the kit's (Options.Store,
	// Advanced.Clock, Options.Logger): New fails when one is set here.
	Channel *imv2.Options
	// URLKey signs the download URLs of offered files (HandlerConfig.URLKey: at
	// least MinURLKeyBytes); default derived from APIKey, so a restart or a
	// replica with the same API key verifies them. Without either the key
	// is random per process: a restart invalidates the URLs of pending
	// messages.
	URLKey []byte
	// Relay, for replicas on one shared Store, carries Receive's user
	// messages to the replica that holds a channel (pgstore.Relay; see
	// Relay). Default: only channels open here are reached (ErrNoChannel).
	// With it the Connector is a replica: it reads its Store every second
	// and lets xAgent's connection go while it cannot (StoreLossGrace).
	Relay Relay
	// Events, when set, gets one JSON object a line for everything the
	// platform showed — every Post, Finish, Draft, PostDraft, Edit and
	// Typing that succeeded: {"event":"final"|"draft"|"post"|"edit",
	// "message_id":…,"text":…}, {"event":"typing","status":…} and
	// {"event":"typing_clear"} — the observer contract of `imv2sim
	// conform -exec` (imv2test.Event). Pass os.Stdout behind a flag of
	// the Connector's own, and the suite observes the binary as shipped.
	// Writes are serialized; their errors are ignored. RunKit and
	// CheckKit watch the kit themselves and stop this stream.
	Events io.Writer
	// Metrics, when set, is served at /metrics instead of the kit's own
	// series (the package doc lists them), for example the metrics
	// module's Collector.Handler.
	Metrics http.Handler
	// MetricsToken, when set, is the credential of GET /metrics
	// ("Authorization: Bearer TOKEN"), on the Connector's address and on
	// StartMonitor's. The API key never opens /metrics, so a scraper does
	// not hold xAgent's credential: a Connector with an API key and no
	// MetricsToken serves /metrics only on StartMonitor's address (open
	// there) and answers 404 on its own. Set it to the API key to keep one
	// credential for both.
	MetricsToken string
	// Routes are served at these exact paths on the Connector's address
	// (not StartMonitor's), before its own endpoints and without the API
	// key: a platform's webhook, which checks its own credential. A path
	// must start with "/" and be none of the Connector's; New fails else.
	Routes map[string]http.Handler
	// OnChannelOpen is called for every channel.open answered with
	// success. Do not block in it.
	OnChannelOpen func(channelID string)
	// OfflineGrace is how long channels outlive their last connection;
	// default dataplane.DefaultOfflineGrace. At its end their bindings
	// are released.
	OfflineGrace time.Duration
	// Clock drives every timer (display, pacing, channels, files);
	// default clock.System{}.
	Clock clock.Clock
}

// Connector is a whole IM Connector Server: an http.Handler serving the
// Card, skill, health, probes, /ws, file transfer and /metrics, with the
// data plane, display strategies, pacing, files and conversation bindings
// assembled around one Platform. Build it with New; it is safe for
// concurrent use. Close it to stop every connection and timer.
type Connector struct {
	card      *protocol.Card
	platform  Platform
	store     state.Store
	clock     clock.Clock
	log       *slog.Logger
	metrics   http.Handler // /metrics: the kit's (metrics.go) or Advanced.Metrics
	scrape    apikey.Key   // guards /metrics: Advanced.MetricsToken (monitor.go)
	km        *kitMetrics
	counted   *countedStore       // the Store, counted; /readyz reads its last write
	ready     readiness           // /readyz's cached verdict (probes.go)
	stWatch   *storeWatch         // a replica's watch on its Store (storewatch.go); nil without Advanced.Relay
	defConv   func(string) string // nil for a Card with auth flows
	relay     Relay
	recv      [receiveStripes]sync.Mutex // serialise Receive per channel and event (inbound.go)
	roomMu    sync.Mutex
	roomWaits map[string]int // Receives waiting for room, by channel (inbound.go roomWait)
	parked    *parking       // grace timers of channels with parked user messages (inbound.go)
	out       *outbound
	pace      *pacer
	display   *display.Target
	server    *dataplane.Server
	handler   *Handler
	chLocks   *channelLocks // serialises binding changes per channel
	// callTimeout bounds Unbound and Released (Display.CallTimeout).
	callTimeout time.Duration

	listener Listener // nil without one
	readWG   sync.WaitGroup
	drain    drain // Shutdown's count of finals in the platform's hands
	watch    watch // imv2test's view of the platform calls (kithook.go)
	routes   map[string]http.Handler

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed once the first Close returned (Shutdown may leave it running)
	servers map[*http.Server]struct{}
	readers map[string]*reader // by channel: the running Listen
}

// New assembles a Connector around platform: display.New, the data-plane
// Server with one Target per channel, the HTTP Handler, pacing and
// bindings. It fails on an invalid Card (H1), a Card that requires an API
// key without one, or a Mode the platform cannot serve.
func New(card *protocol.Card, platform Platform, opts *Options) (*Connector, error) {
	if platform == nil {
		return nil, errors.New("connector: nil Platform")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if ch := o.Advanced.Channel; ch != nil && (ch.Pending != nil || ch.Completed != nil || ch.Clock != nil || ch.Logger != nil) {
		return nil, errors.New("connector: Advanced.Channel's Pending, Completed, Clock and Logger are the kit's: set Options.Store, Advanced.Clock or Options.Logger")
	}
	adv := &o.Advanced
	if adv.Clock == nil {
		adv.Clock = clock.System{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	onOpen := relayOpened(adv.Relay, adv.OnChannelOpen)
	c := &Connector{
		card: card, platform: platform, store: o.Store, clock: adv.Clock, log: o.Logger, roomWaits: map[string]int{},
		metrics: adv.Metrics, scrape: apikey.New(adv.MetricsToken), closing: make(chan struct{}), servers: map[*http.Server]struct{}{}, readers: map[string]*reader{}, chLocks: newChannelLocks(),
	}
	c.km = newKitMetrics(adv.Clock, c.openChannels)
	if c.metrics == nil {
		c.metrics = c.km
	}
	c.listener, _ = platform.(Listener)
	c.watch.built = builtWith(&o, platform)
	if adv.Events != nil {
		saw := newEventLog(adv.Events).saw
		c.watch.f.Store(&saw)
	}
	if card != nil && len(card.AuthFlows) == 0 {
		c.defConv = o.DefaultConversation
		if c.defConv == nil {
			c.defConv = func(string) string { return DefaultConversationKey }
		}
	}
	for p := range adv.Routes {
		if !strings.HasPrefix(p, "/") || ownPath(p) {
			return nil, fmt.Errorf("connector: Advanced.Routes: %q is not a path of its own", p)
		}
	}
	c.routes = maps.Clone(adv.Routes)
	var err error
	if c.pace, err = newPacer(o.Pace, adv.Clock); err != nil {
		return nil, err
	}
	c.handler, err = NewHandler(HandlerConfig{
		Card: card, Markdown: o.Skill, APIKey: o.APIKey, URLKey: adv.URLKey, Files: o.Files, Clock: adv.Clock, Logger: o.Logger,
		WS: c.km.countConnection(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.server.ServeHTTP(w, r) })),
		// Uploads only to channels issued and open (Connector.acceptsUploads).
		ChannelOpen: c.acceptsUploads,
		ConnectorOf: func(id string) string { return c.server.ConnectorOf(id) }, // c.server is set below
	})
	if err != nil {
		return nil, err
	}
	c.out = newOutbound(c, platform)
	d := adv.Display
	dopts := display.Options{
		Mode: o.Mode.internal(), Interval: d.Interval, MaxDrafts: d.MaxDrafts, DraftTTL: d.DraftTTL,
		TypingRefresh: d.TypingRefresh, MaxTyping: d.MaxTyping, CallTimeout: d.CallTimeout, MaxTextBytes: d.MaxTextBytes,
		Clock: adv.Clock, Logger: o.Logger,
	}
	if adv.Channel != nil {
		dopts.ActivityTimeout = adv.Channel.ActivityTimeout
	}
	c.callTimeout = dopts.CallTimeout
	if c.callTimeout <= 0 {
		c.callTimeout = display.DefaultCallTimeout
	}
	switch {
	case o.Mode == ModeAuto:
		dopts.Mode = c.out.mode()
	case dopts.Mode == display.Stream && c.out.drafter == nil:
		return nil, fmt.Errorf("connector: mode stream needs a Drafter, %T is none", platform)
	case dopts.Mode == display.Edit && c.out.editor == nil:
		return nil, fmt.Errorf("connector: mode edit needs an Editor, %T is none", platform)
	}
	if c.display, err = display.New(c.out, &dopts); err != nil {
		return nil, err
	}
	var copts imv2.Options
	if adv.Channel != nil {
		copts = *adv.Channel
	}
	copts.Clock, copts.Logger = adv.Clock, o.Logger
	copts.Observer = c.drain.observer(metricsObserver{c.km, copts.Observer})
	var registry state.ChannelRegistry
	if c.store == nil {
		c.store = newMemoryStore(adv.Clock)
		o.Logger.Warn("connector: state is in memory (no Options.Store): after a restart xAgent's resend of a final whose ack was lost is posted a second time (S8), and pending user messages are lost; set Options.Store to a durable store (boltstore, pgstore) for a Connector that runs as a service")
	}
	c.counted = newCountedStore(c.store, c.km, adv.Clock)
	c.store = c.counted.kitStore()
	copts.Pending, copts.Completed, registry = c.counted, c.counted.completed(), c.counted.registry()
	c.parked = newParking(adv.Clock, cmp.Or(adv.OfflineGrace, dataplane.DefaultOfflineGrace), copts.OnFailed)
	cfg := dataplane.ServerConfig{
		Card:      card,
		NewTarget: func(string) imv2.Target { return drainTarget{c.display, c} },
		Describe:  c.describe,
		Tools:     o.Tools,
		Options:   &copts,
		Logger:    o.Logger,
		Clock:     adv.Clock,
		Registry:  registry,
		OnChannelOpen: func(id string) {
			c.listen(id)
			if onOpen != nil {
				onOpen(id)
			}
		},
		OnChannelDrop: c.dropped,
		OfflineGrace:  adv.OfflineGrace,
	}
	cfg.OnChannelClose = c.channelClosed // the channel's reader stops with it
	if si, ok := platform.(SignIn); ok {
		cfg.Auth = authHandler{c, si}
	}
	if c.defConv != nil {
		cfg.OnChannelCreate, cfg.OnChannelReopen = c.created, c.reopened
	}
	cfg.OnChannelCreate, cfg.OnChannelReopen = c.admitOpen(cfg.OnChannelCreate), c.admitOpen(cfg.OnChannelReopen)
	if c.server, err = dataplane.NewServer(cfg); err != nil {
		c.display.Close()
		return nil, err
	}
	c.relay = adv.Relay
	if rs, ok := adv.Relay.(interface{ Serve(state.OpenChannels) }); ok {
		rs.Serve(c.server)
	}
	if adv.Relay != nil {
		c.stWatch = c.watchStore() // a replica lets xAgent go when it loses its Store
	}
	return c, nil
}

// ServeHTTP serves every endpoint: Advanced.Routes, those of Handler,
// the probes /livez and /readyz (probes.go) and GET /metrics (the kit's
// series, or Options.Advanced.Metrics) behind Advanced.MetricsToken,
// never the API key (monitor.go).
func (c *Connector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := c.routes[r.URL.Path]; ok {
		h.ServeHTTP(w, r)
		return
	}
	if c.serveProbe(w, r) {
		return
	}
	if r.URL.Path == "/metrics" {
		c.serveMetrics(w, r)
		return
	}
	c.handler.ServeHTTP(w, r)
}

// ownPath reports whether the Connector serves path p itself (ServeHTTP,
// Handler.ServeHTTP).
func ownPath(p string) bool {
	switch p {
	case "/connector-card.json", "/skill.md", "/health", "/ws", "/files/uploads", "/livez", "/readyz", "/metrics":
		return true
	}
	return strings.HasPrefix(p, "/files/refs/")
}

// ListenAndServe listens on addr and serves until ctx ends, then shuts the
// listener down (waiting up to ShutdownTimeout) and returns nil; any other
// end is the error.
func (c *Connector) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return c.Serve(ctx, ln)
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves in
// the background until Close. It returns the base URL, http://host:port;
// after Close it fails with imv2.ErrClosed.
func (c *Connector) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	hs, err := c.register(ln) // before Start returns: a Close after it shuts this server down
	if err != nil {
		return "", err
	}
	go func() {
		if err := c.serve(context.Background(), hs, ln); err != nil {
			c.log.Error("connector: serving failed", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// Serve serves on ln (an http.Server with NewServer's timeouts) until ctx
// ends or Close is called.
func (c *Connector) Serve(ctx context.Context, ln net.Listener) error {
	hs, err := c.register(ln)
	if err != nil {
		return err
	}
	return c.serve(ctx, hs, ln)
}

// register makes the http.Server of ln and adds it to those Close shuts
// down; after Close it closes ln and fails with imv2.ErrClosed.
func (c *Connector) register(ln net.Listener) (*http.Server, error) {
	return c.registerHandler(ln, c)
}

// registerHandler is register serving h.
func (c *Connector) registerHandler(ln net.Listener, h http.Handler) (*http.Server, error) {
	hs := NewServer(ln.Addr().String(), h)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		ln.Close()
		return nil, imv2.ErrClosed
	}
	c.servers[hs] = struct{}{}
	return hs, nil
}

// serve runs hs on ln until ctx ends or Close shut it down (then nil).
func (c *Connector) serve(ctx context.Context, hs *http.Server, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { c.shutdown(hs) })
	defer stop()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (c *Connector) shutdown(hs *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if hs.Shutdown(ctx) != nil {
		hs.Close()
	}
	c.mu.Lock()
	delete(c.servers, hs)
	c.mu.Unlock()
}

// Close stops serving, ends every connection, stops every timer and
// closes every Channel; pending state stays in the Store, which the
// caller closes afterwards. A platform call in flight is cancelled:
// Shutdown lets them finish first. Close waits for the platform calls to
// return; a second Close returns at once.
func (c *Connector) Close() error {
	c.drain.stop()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	servers := make([]*http.Server, 0, len(c.servers))
	for hs := range c.servers {
		servers = append(servers, hs)
	}
	c.mu.Unlock()
	for _, hs := range servers {
		c.shutdown(hs)
	}
	defer close(c.closing)
	c.stWatch.stop()
	c.closeReaders()
	c.parked.close()
	err := c.server.Close()
	c.display.Close()
	return err
}

// Server returns the data-plane Server, for what the kit does not wrap.
func (c *Connector) Server() *dataplane.Server { return c.server }

// Handler returns the HTTP Handler (file store, download URLs).
func (c *Connector) Handler() *Handler { return c.handler }

// Mode returns the display mode in use.
func (c *Connector) Mode() Mode { return Mode(c.display.Mode()) }

// MaxFileBytes is the largest file OfferFile, and so an Event's file,
// takes (Config.MaxUploadBytes): a Listener fetching a shared file stops
// past it rather than download what the kit refuses.
func (c *Connector) MaxFileBytes() int64 { return c.handler.cfg.MaxUploadBytes }

// APIKeyGrace is how long SetAPIKey keeps the previous key valid: long
// enough for xAgent to be given the new one and reconnect.
const APIKeyGrace = 10 * time.Minute

// SetAPIKey rotates the API key (a key file reloaded on SIGHUP): new
// requests and connections must present key, or the previous key within
// APIKeyGrace; connections already up stay. A Connector started without
// a key, or an empty key, is an error and nothing changes.
func (c *Connector) SetAPIKey(key string) error {
	return c.handler.SetAPIKey(key, APIKeyGrace) // the Handler checks the key of /ws too
}

// OfferFile stores a user's file for channelID and returns the imv2.File
// to send to xAgent, with its signed download_url (M6, T2, T3).
func (c *Connector) OfferFile(ctx context.Context, channelID, filename, mimeType string, r io.Reader) (imv2.File, error) {
	return c.handler.OfferFile(ctx, channelID, filename, mimeType, r)
}
