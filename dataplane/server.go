package dataplane

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/apikey"
	"github.com/xagentkit/imv2/internal/defaults"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// Defaults of ServerConfig.
const (
	// DefaultMaxChannels bounds the channels one connector_id holds, open
	// or closed-but-kept (W5, W6). A channel.open for a new channel beyond
	// it first evicts the least recently used closed channel; when every
	// channel is open it is refused with connector_channel_unavailable.
	DefaultMaxChannels = 1000
	// DefaultOfflineGrace is how long a connector_id and its channels
	// outlive their last connection (Common Protocol §8.2, Connector Architecture §3.4: 1 h). A hello
	// with the same connector_id within it finds its channels; after it
	// they are closed and dropped.
	DefaultOfflineGrace = time.Hour
	// DefaultMaxConnectors bounds the connector_id instances kept, online
	// or within their offline grace. A hello that needs a new one beyond it
	// first evicts the offline instance holding no channels that was seen
	// least recently (a hello never followed by channel.open holds nothing
	// a returning xAgent would miss); when none is, the offline instance
	// seen least recently whose channels hold no pending message gives
	// way (connectors.go: makeRoom), so a burst of hellos that each opened
	// a channel and left cannot lock a newcomer out for the grace. Only
	// when every instance is online or holds pending messages is the
	// hello refused with connector_id_mismatch: those are never evicted.
	// 64 leaves room for conformance runs (imv2test opens channels on most
	// of its fresh connector_ids) beside the few real xAgents, which keep
	// their connector_id. Its fixed cost is bounded by MaxChannels per
	// instance (idle channels ≈ 1 KB each).
	DefaultMaxConnectors = 64
	// DefaultHelloTimeout closes a connection that completed no hello.
	DefaultHelloTimeout = 30 * time.Second
	// DefaultMaxHandlerCalls bounds concurrent AuthHandler and ToolHandler
	// calls per connection; further requests wait (backpressure).
	DefaultMaxHandlerCalls = 32
	// DefaultMaxPreHello bounds the connections that completed no hello
	// yet, per Server: each costs about 26 KB (buffers, goroutines) until
	// its hello or DefaultHelloTimeout, so the cap holds them under 7 MB.
	// ServeHTTP answers 503 beyond it, before the upgrade.
	DefaultMaxPreHello = 256
	// DefaultMaxMemory is the Server's budget, in bytes, for the state its
	// peers make it hold: delta text (by buffer capacity) and messages
	// queued for a Target or waiting on one, across every connector_id
	// (imv2.Budget). Over it a delta needing room gets
	// delta_limit_exceeded and a final channel_busy (retryable). 64 MiB is
	// 64 full-size (1 MiB) replies at once. The heap may hold up to three
	// times a budget: the buffers a growing stream replaced (doubling keeps
	// their sum under the live size) and Go's collection slack (GOGC=100
	// lets garbage reach the live heap) — so about 200 MiB plus the fixed
	// costs (pre-hello connections, channels), whatever the peers do.
	// TestAttack_DeltaFloodStaysInBudget measures it.
	DefaultMaxMemory = 64 << 20
	// DefaultMaxConnectorMemory is each connector_id's share of the same
	// state, so one peer cannot take the whole Server budget: 16 full-size
	// replies streaming or queued at once, far more than one xAgent's
	// tool loops produce.
	//
	// Beyond that cap, each connector_id held is guaranteed a floor of the
	// Server budget no other can take: MaxMemory/(2·MaxConnectors) (512 KiB
	// by default, hundreds of finals), at most MaxConnectorMemory. The
	// floors of MaxConnectors are kept aside, and what connector_ids hold
	// beyond their floors takes at most the rest (32 MiB by default), so
	// any number of peers filling the budget leave every other its floor
	// (imv2.NewPooledBudget).
	DefaultMaxConnectorMemory = 16 << 20
	// MaxHelloProfiles bounds the entries of a hello's
	// supported_profiles, and MaxProfileIDBytes each entry: a hello
	// beyond either is refused invalid_packet. The catalog has a handful
	// of profiles; the session keeps the list (≤ 4 KiB) for its error
	// messages and the negotiated set.
	MaxHelloProfiles  = 32
	MaxProfileIDBytes = 128
)

// helloReadLimit bounds each frame a connection reads before its hello
// completes (a hello within the caps above is under 5 KiB), so the
// MaxPreHello connections hold at most 16 MiB of frames between them.
const helloReadLimit = 64 << 10

// ServerConfig configures a Server. Card and NewTarget are required.
type ServerConfig struct {
	// Card is the Connector Card: its connector_card_id must match each
	// hello (W4), its profiles are negotiated per channel (P3), its tools
	// and auth flows bound what is routed (W12).
	Card *protocol.Card
	// NewTarget returns the Target (IM platform) of one channel; called
	// once when the channel is created.
	NewTarget func(channelID string) imv2.Target

	// TargetType, Provider, Label and DisplayName fill every Descriptor's
	// connection.target_type and target. Defaults: "im", then provider and
	// label of the Card's first supports.targets entry of that type, and
	// DisplayName = Label (or Provider).
	TargetType  string
	Provider    string
	Label       string
	DisplayName string
	// Describe reports the per-channel part of the Descriptor (status,
	// display name, tools). Optional: nil means status created.
	Describe func(ctx context.Context, channelID string) ChannelInfo

	// Auth and Tools serve auth.* and tool.invoke (W12). Optional: when
	// nil those packets get unsupported_packet.
	Auth  AuthHandler
	Tools ToolHandler

	// Options configure every Channel. When Options.Clock or Logger is
	// nil, Clock and Logger below are used.
	Options *imv2.Options
	// APIKey, when set, must arrive as "Authorization: Bearer <key>" on
	// the upgrade; it is compared in constant time (W1). The connector
	// kit checks it too; set it here when mounting the handler alone.
	APIKey string
	// Logger receives connection events; nothing by default.
	Logger *slog.Logger
	// Clock drives the offline grace, hello timeout and keepalive. The
	// bounds on socket and store I/O (write, close, store calls) are
	// wall-clock deadlines, as the network and stores need.
	Clock clock.Clock
	// Conn tunes each WebSocket (read limit, keepalive, timeouts).
	Conn ConnConfig
	// CheckOrigin is passed to the WebSocket upgrader; nil keeps
	// gorilla/websocket's same-origin check (xAgent's backend sends no
	// Origin header).
	CheckOrigin func(r *http.Request) bool

	MaxChannels     int           // default DefaultMaxChannels
	OfflineGrace    time.Duration // default DefaultOfflineGrace
	MaxConnectors   int           // default DefaultMaxConnectors
	HelloTimeout    time.Duration // default DefaultHelloTimeout
	MaxHandlerCalls int           // default DefaultMaxHandlerCalls
	MaxPreHello     int           // default DefaultMaxPreHello
	// MaxMemory and MaxConnectorMemory are the byte budgets of the
	// Server and of each connector_id (defaults DefaultMaxMemory,
	// DefaultMaxConnectorMemory). Options.Budget, when set, is the
	// parent of the Server's budget.
	MaxMemory          int64
	MaxConnectorMemory int64

	// Registry remembers issued channel IDs across restarts, so a reopen
	// with a stored ID finds the channel's durable state (W5, S8).
	// Default: a state.MemoryRegistry, which forgets on restart.
	Registry state.ChannelRegistry
	// OnChannelOpen is called for every channel.open about to be answered
	// with success, with the channel's ID. Do not block in it.
	OnChannelOpen func(channelID string)
	// OnChannelClose is called after a channel.close of a channel open on
	// the connection that sent it was answered, with the channel's ID, and
	// only while no other connection holds the channel open. Do not block
	// in it.
	OnChannelClose func(channelID string)
	// OnChannelCreate is called once per channel ID the Server issues (a
	// channel.open without an ID, or with one it does not know), before
	// that channel.open is answered and before OnChannelOpen; a reopen of
	// the ID, also after a restart, does not call it. An error refuses
	// the channel.open with it and drops the new channel at once
	// (OnChannelDrop, then the Registry forgets its ID), so refused opens
	// take no MaxChannels slot.
	OnChannelCreate func(ctx context.Context, channelID string) error
	// OnChannelReopen is called, where OnChannelCreate is not, before a
	// channel.open of a channel the Server already knew (held, or
	// registered before a restart) is answered: the place to restore
	// what a channel needs at each open. An error refuses the
	// channel.open with it; the channel stays.
	OnChannelReopen func(ctx context.Context, channelID string) error

	// OnChannelDrop is called after a channel was closed because its
	// connector_id stayed offline past OfflineGrace (or it was evicted),
	// and before the Registry forgets it: the place to sign out of the
	// target platform (Connector Architecture §3.4). What it removes goes
	// before the ID does, so a crash between leaves a registered channel
	// without the author's state (dropped again after its next grace),
	// never the author's state of a channel nobody knows. An error keeps
	// the ID registered: a reopen with it then finds the channel again,
	// with what OnChannelDrop could not remove.
	OnChannelDrop func(channelID string) error
}

// Server is the Connector side of the data plane: an http.Handler for
// GET /ws that runs the hello, channel.open/close, descriptor, ping and
// error packets of the Common Protocol 3.0 and routes IM v2 packets to one
// imv2.Channel per connector_channel_id (I1). Channels outlive connections:
// a reconnect that reopens a channel reattaches it, and the Channel resends
// what is pending (S10).
type Server struct {
	cfg      ServerConfig
	log      *slog.Logger
	clock    clock.Clock
	opts     imv2.Options
	upgrader websocket.Upgrader
	key      apikey.Key
	imTypes  map[string]bool
	cardTool map[string]bool
	cardFlow map[string]bool

	budget *imv2.Budget // MaxMemory, parent of every instance's
	tools  *toolReplays // answered tool.invoke calls, for replays (W13)

	mu        sync.Mutex
	closed    bool
	preHello  int                      // connections holding a pre-hello slot
	instances map[string]*instance     // by connector_id
	channels  map[string]*channelEntry // by connector_channel_id, all instances
	sessions  map[*session]struct{}    // live connections
	wg        sync.WaitGroup           // sessions
	dropWG    sync.WaitGroup           // OnChannelDrop / Channel.Close after expiry
	beat      clock.Timer              // shared-registry heartbeat (connectors.go)
	beatWG    sync.WaitGroup
	// dropping holds, per dropped channel ID until the Registry forgot
	// it, a channel closed when its Drop returned: a handover from that
	// ID waits for it (handoverCompleted), and a channel.open of that ID
	// gets a new one, as after the Forget. One entry per running drop
	// goroutine.
	dropping map[string]chan struct{}
	// drops counts the drops begun: a reopen that asked the Registry
	// about an ID reuses it only if no drop began meanwhile (that drop's
	// Forget may have made the answer stale).
	drops uint64
	// unavailable is SetUnavailable's reason: upgrades are refused while
	// it is set (unavailable.go).
	unavailable string
}

// instance is one connector_id: the channels it owns and its offline grace.
type instance struct {
	id       string
	live     int // hello-completed connections
	gen      uint64
	budget   *imv2.Budget // MaxConnectorMemory, shared by its channels
	grace    clock.Timer
	offline  time.Time
	channels map[string]*channelEntry
}

// channelEntry is one channel of an instance. owner is the session the
// channel is open on, nil while closed or disconnected.
type channelEntry struct {
	id       string
	inst     *instance
	ch       *imv2.Channel
	neg      *imv2.Negotiated
	owner    *session
	lastUsed time.Time

	tmu     sync.Mutex // serialises SetTransport calls
	applied *session   // owner whose transport the Channel holds
}

// NewServer checks cfg and returns a Server. Close it to stop every
// connection, timer and Channel.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Card == nil || cfg.Card.ConnectorCardID == "" {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: ServerConfig.Card with a connector_card_id is required")
	}
	if len(cfg.Card.Supports.Profiles) == 0 {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: the Card declares no profile")
	}
	// The whole Card, with the 3.0 text's Card and Skill-name rules, fails
	// here rather than in front of xAgent (H1, Common Protocol §4.1 and §4.2).
	if err := cfg.Card.Validate(); err != nil {
		return nil, err
	}
	if cfg.NewTarget == nil {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: ServerConfig.NewTarget is required")
	}
	if cfg.TargetType == "" {
		cfg.TargetType = imv2.TargetTypeIM
	}
	for _, t := range cfg.Card.Supports.Targets {
		if t.TargetType == cfg.TargetType {
			if cfg.Provider == "" {
				cfg.Provider = t.Provider
			}
			if cfg.Label == "" {
				cfg.Label = t.Label
			}
			break
		}
	}
	if cfg.Provider == "" {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: no provider for target type %q (set ServerConfig.Provider or Card supports.targets)", cfg.TargetType)
	}
	if cfg.DisplayName == "" {
		cfg.DisplayName = defaults.Or(cfg.Label, cfg.Provider)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Conn.Clock == nil {
		cfg.Conn.Clock = cfg.Clock
	}
	defaults.Set(&cfg.MaxChannels, DefaultMaxChannels)
	if cfg.Registry == nil {
		cfg.Registry = state.NewMemoryRegistry(0)
	}
	defaults.Set(&cfg.MaxConnectors, DefaultMaxConnectors)
	defaults.Set(&cfg.MaxHandlerCalls, DefaultMaxHandlerCalls)
	defaults.Set(&cfg.MaxPreHello, DefaultMaxPreHello)
	if cfg.MaxMemory <= 0 {
		cfg.MaxMemory = DefaultMaxMemory
	}
	if cfg.MaxConnectorMemory <= 0 {
		cfg.MaxConnectorMemory = DefaultMaxConnectorMemory
	}
	defaults.Set(&cfg.OfflineGrace, DefaultOfflineGrace)
	defaults.Set(&cfg.HelloTimeout, DefaultHelloTimeout)

	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		clock:     cfg.Clock,
		imTypes:   profilePacketTypes(),
		cardTool:  map[string]bool{},
		cardFlow:  map[string]bool{},
		instances: map[string]*instance{},
		channels:  map[string]*channelEntry{},
		sessions:  map[*session]struct{}{},
		dropping:  map[string]chan struct{}{},
		tools:     newToolReplays(cfg.Clock),
	}
	if cfg.Options != nil {
		s.opts = *cfg.Options
	}
	if s.opts.Clock == nil {
		s.opts.Clock = cfg.Clock
	}
	if s.opts.Logger == nil {
		s.opts.Logger = cfg.Logger
	}
	sharedStores(&s.opts)
	// Each connector_id held (at most MaxConnectors) is guaranteed a
	// floor of the budget (see DefaultMaxConnectorMemory): the instances'
	// budgets are its children.
	floor := min(cfg.MaxConnectorMemory, cfg.MaxMemory/int64(2*cfg.MaxConnectors))
	s.budget = imv2.NewPooledBudget(cfg.MaxMemory, floor, cfg.MaxConnectors, s.opts.Budget)
	s.startHeartbeat()
	for _, t := range cfg.Card.Tools {
		s.cardTool[t.ToolID] = true
	}
	for _, f := range cfg.Card.AuthFlows {
		s.cardFlow[f.ID] = true
	}
	s.key = apikey.New(cfg.APIKey).WithClock(s.clock) // unset (allows all) when empty
	s.upgrader = websocket.Upgrader{
		Subprotocols: []string{protocol.Subprotocol},
		CheckOrigin:  cfg.CheckOrigin,
	}
	return s, nil
}

// profilePacketTypes lists every packet type of every catalog profile:
// those are routed to a Channel by connector_channel_id (I1).
func profilePacketTypes() map[string]bool {
	m := map[string]bool{}
	for _, p := range imv2.DefaultCatalog() {
		for typ := range p.Packets {
			m[typ] = true
		}
	}
	return m
}

// ServeHTTP upgrades GET /ws to a data-plane WebSocket (W1) and serves it
// until it ends. A request that does not offer the subprotocol
// xagent.connector.packet.v1 gets 400; a wrong or missing API key (when
// ServerConfig.APIKey is set) gets 401.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.key.Allow(r.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="xagent-connector"`)
		http.Error(w, "missing or invalid API key", http.StatusUnauthorized)
		return
	}
	if !slices.Contains(websocket.Subprotocols(r), protocol.Subprotocol) {
		http.Error(w, "WebSocket subprotocol "+protocol.Subprotocol+" required (W1)", http.StatusBadRequest)
		return
	}
	if s.refuseUnavailable(w) {
		return
	}
	s.mu.Lock()
	closed := s.closed
	full := !closed && s.preHello >= s.cfg.MaxPreHello
	if !closed && !full {
		s.preHello++ // held from before the upgrade until the hello
	}
	s.mu.Unlock()
	switch {
	case closed:
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	case full:
		s.log.Warn("dataplane: too many connections without a hello; upgrade refused", "max", s.cfg.MaxPreHello)
		http.Error(w, "too many connections awaiting their hello; try again later", http.StatusServiceUnavailable)
		return
	}
	var slot batchSlot // the connection, for write coalescing
	ws, err := s.upgrader.Upgrade(slot.responseWriter(w), r, nil)
	if err != nil {
		s.releasePreHello()
		s.log.Debug("dataplane: upgrade failed", "err", err)
		return // the upgrader has answered
	}
	cc := s.cfg.Conn
	cc.helloLimit = helloReadLimit
	_ = s.serveConn(context.Background(), newBatchedWSConn(ws, slot.bc, cc), true)
}

// releasePreHello frees a slot ServeHTTP took for a connection that never
// became a session.
func (s *Server) releasePreHello() {
	s.mu.Lock()
	s.preHello--
	s.mu.Unlock()
}

// ServeConn serves one data-plane connection over any Conn (a WebSocket
// from ServeHTTP, or NewPipe in tests) until it ends or ctx is done. It
// closes conn before returning.
func (s *Server) ServeConn(ctx context.Context, conn Conn) error {
	return s.serveConn(ctx, conn, false)
}

// serveConn serves conn; slot says ServeHTTP already took its pre-hello
// slot (else the session takes one, or conn is closed at once).
func (s *Server) serveConn(ctx context.Context, conn Conn, slot bool) error {
	ss := s.newSession(ctx, conn, slot)
	if ss == nil {
		_ = conn.Close()
		return imv2.ErrClosed
	}
	return ss.run()
}

// MemoryUsed returns the bytes of peer-made state (delta text, queued
// finals, waiting resends) held against the Server's MaxMemory now: a
// gauge for the operator, never above MaxMemory.
func (s *Server) MemoryUsed() int64 { return s.budget.Used() }

// Channel returns the Channel of a connector_channel_id, open or not, or
// nil when no connector_id holds it. Use it to send user messages:
// server.Channel(id).Send(ctx, msg). A message sent while the channel is
// closed or disconnected stays pending and goes out on reopen (S10).
func (s *Server) Channel(channelID string) *imv2.Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.channels[channelID]; e != nil {
		return e.ch
	}
	return nil
}

// SetAPIKey makes key the API key a new connection must present and
// keeps the current one valid for grace more, so a key file rotated and
// reloaded (SIGHUP) refuses no peer that has not moved over yet.
// Connections already up stay. A Server started without a key, or an
// empty key, is refused with an error: a reload never turns the check on
// or off.
func (s *Server) SetAPIKey(key string, grace time.Duration) error {
	return s.key.Rotate(key, grace)
}

// ConnectorOf returns the connector_id holding the channel here, "" for
// none: the peer a Connector charges the channel's uploads to.
func (s *Server) ConnectorOf(channelID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.channels[channelID]; e != nil {
		return e.inst.id
	}
	return ""
}

// ChannelIDs returns the IDs of every channel held, open or not, sorted.
func (s *Server) ChannelIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.channels))
	for id := range s.channels {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// IsOpen reports whether the channel is open on a live connection.
func (s *Server) IsOpen(channelID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.channels[channelID]
	return e != nil && e.owner != nil
}

// Descriptor returns the channel's current Connection Descriptor, for an
// AuthHandler that wants to put it in an ack itself.
func (s *Server) Descriptor(ctx context.Context, channelID string) (*protocol.Descriptor, error) {
	s.mu.Lock()
	e := s.channels[channelID]
	s.mu.Unlock()
	if e == nil {
		return nil, imv2.Errorf(protocol.CodeConnectionNotFound, "channel %q is not known", channelID)
	}
	return s.describe(ctx, e), nil
}

// Push sends connection.descriptor.push for the channel (W7): call it
// after a sign-in, a permission change, a target disconnect or token
// expiry. The channel must be open (channel_not_open otherwise).
func (s *Server) Push(ctx context.Context, channelID string) error {
	s.mu.Lock()
	e := s.channels[channelID]
	var owner *session
	if e != nil {
		owner = e.owner
	}
	s.mu.Unlock()
	if owner == nil {
		return imv2.Errorf(imv2.CodeChannelNotOpen, "channel %q is not open", channelID)
	}
	p, err := imv2.NewPacket(protocol.TypeDescriptorPush, channelID, protocol.DescriptorPayload{ConnectionDescriptor: s.describe(ctx, e)})
	if err != nil {
		return err
	}
	return owner.conn.Write(ctx, p)
}

// Close ends every connection, stops every timer and closes every Channel
// (pending messages stay in their stores). ServeHTTP answers 503 after it.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sessions := make([]*session, 0, len(s.sessions))
	for ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.cancel() // frees a read loop waiting for a handler slot
		_ = ss.conn.Close()
	}
	s.stopHeartbeat()
	s.wg.Wait()
	s.dropWG.Wait()
	s.mu.Lock()
	var chans []*imv2.Channel
	for _, inst := range s.instances {
		if inst.grace != nil {
			inst.grace.Stop()
		}
		for _, e := range inst.channels {
			chans = append(chans, e.ch)
		}
	}
	s.instances = map[string]*instance{}
	s.channels = map[string]*channelEntry{}
	s.mu.Unlock()
	for _, ch := range chans {
		_ = ch.Close()
	}
	return nil
}

// describe builds the channel's Descriptor (W5, W7, H5): identity from the
// Card and the instance, profiles from negotiation (P2), the rest from
// the config and Describe. Tools the Card does not declare are dropped.
func (s *Server) describe(ctx context.Context, e *channelEntry) *protocol.Descriptor {
	var info ChannelInfo
	if s.cfg.Describe != nil {
		info = s.cfg.Describe(ctx, e.id)
	}
	var tools []protocol.ToolState
	for _, t := range info.Tools {
		if s.cardTool[t.ToolID] {
			tools = append(tools, t)
		} else {
			s.log.Warn("dataplane: Describe named a tool the Card does not declare; dropped", "tool_id", t.ToolID)
		}
	}
	s.mu.Lock()
	neg := e.neg
	s.mu.Unlock()
	return validDescriptor(&protocol.Descriptor{
		Schema: protocol.DescriptorSchema,
		Connection: protocol.Connection{
			ConnectorCardID:    s.cfg.Card.ConnectorCardID,
			ConnectorID:        e.inst.id,
			ConnectorChannelID: e.id,
			TargetType:         s.cfg.TargetType,
			Profiles:           neg.Profiles(),
			Status:             defaults.Or(info.Status, protocol.StatusCreated),
		},
		Target: protocol.DescriptorTarget{
			Provider:    s.cfg.Provider,
			Label:       s.cfg.Label,
			DisplayName: defaults.Or(info.DisplayName, s.cfg.DisplayName),
			AccountHint: info.AccountHint,
		},
		Tools: tools,
	})
}

// attach binds a session to the connector_id of its hello: the known
// instance (cancelling its offline grace) or a new one. A non-empty
// connector_id this server does not know (expired, or a restart) gets a
// new one, as Common Protocol §8.1 allows; xAgent then replaces its ConnectorClient.
//
// adopt (a shared state.ConnectorRegistry knows connectorID, connectors.go)
// makes the new instance keep connectorID.
func (s *Server) attach(ss *session, connectorID string, adopt bool) (*instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, imv2.ErrClosed
	}
	inst := s.instances[connectorID]
	if inst == nil {
		// Evict only an offline instance without channels: it holds
		// nothing a returning xAgent would miss (a hello without
		// channel.open, or a probe). One with channels keeps its full
		// grace, and its channels must be there when it returns.
		if len(s.instances) >= s.cfg.MaxConnectors {
			s.evictEmptyLocked()
		}
		if len(s.instances) >= s.cfg.MaxConnectors {
			return nil, imv2.Errorf(protocol.CodeConnectorIDMismatch, "this Connector serves %d connector_ids, each online or holding pending messages within its offline grace; try later", s.cfg.MaxConnectors)
		}
		id := "conn_" + uuid.NewString()
		if adopt {
			id = connectorID
		}
		inst = &instance{
			id:       id,
			budget:   imv2.NewBudget(s.cfg.MaxConnectorMemory, s.budget),
			channels: map[string]*channelEntry{},
		}
		s.instances[inst.id] = inst
	} else if inst.live > 0 {
		// One holder per connector_id: a second hello while the first
		// connection is up is refused, not handed the channels (see the
		// package doc). Retryable: a holder that died unnoticed is cut by
		// its keepalive within PingInterval+PongTimeout, so the message
		// says to try again.
		return nil, imv2.Errorf(protocol.CodeConnectorIDMismatch, "connector_id %q is online on another connection, and one connection holds a connector_id; try again once it ended", inst.id)
	}
	if ss.preHello {
		ss.preHello = false
		s.preHello--
	}
	ss.inst = inst
	inst.live++
	inst.gen++ // invalidates a running grace timer
	if inst.grace != nil {
		inst.grace.Stop()
		inst.grace = nil
	}
	return inst, nil
}

// holderWait bounds how long a hello waits for the connection holding its
// connector_id to end (see awaitHolder).
const holderWait = 2 * time.Second

// awaitHolder waits, at most holderWait, until no connection holds
// connectorID: a client that closed its connection and dials again at
// once may say hello before the Server has detached the old one, whose
// end is then a matter of milliseconds. A holder that stays (another
// peer, or a connection that died unnoticed) costs the hello this wait,
// then attach refuses it.
func (s *Server) awaitHolder(ctx context.Context, connectorID string) {
	if connectorID == "" {
		return
	}
	s.mu.Lock()
	var holder *session
	for ss := range s.sessions {
		if ss.inst != nil && ss.inst.id == connectorID {
			holder = ss
			break
		}
	}
	s.mu.Unlock()
	if holder == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, holderWait)
	defer cancel()
	select {
	case <-holder.ended:
	case <-wctx.Done():
	}
}

// evictEmptyLocked drops the offline instance without channels that was
// seen least recently, if any. A channel, even closed and even with no
// pending entry, may carry completed records that answer a resend
// duplicate, or the author's auth state: its instance is never taken.
func (s *Server) evictEmptyLocked() {
	var victim *instance
	for _, inst := range s.instances {
		if inst.live > 0 || len(inst.channels) > 0 {
			continue
		}
		if victim == nil || inst.offline.Before(victim.offline) {
			victim = inst
		}
	}
	if victim != nil {
		s.log.Info("dataplane: connector_id cap reached; evicting an offline connector_id without channels", "connector_id", victim.id)
		s.dropInstanceLocked(victim)
	}
}

// detach unbinds a session that ended: its channels lose their transport
// (pending stays pending, A5) and, if it was the instance's last
// connection, the offline grace starts (Common Protocol §8.2).
func (s *Server) detach(ss *session) {
	s.mu.Lock()
	var moved []*channelEntry
	for _, e := range ss.open {
		if e.owner == ss {
			e.owner = nil
			moved = append(moved, e)
		}
	}
	ss.open = nil
	if ss.preHello {
		ss.preHello = false
		s.preHello--
	}
	wentOffline := ""
	var offlineAt time.Time
	if inst := ss.inst; inst != nil && s.instances[inst.id] == inst {
		inst.live--
		if inst.live == 0 {
			inst.gen++
			gen := inst.gen
			inst.offline = s.clock.Now()
			wentOffline, offlineAt = inst.id, inst.offline
			inst.grace = s.clock.AfterFunc(s.cfg.OfflineGrace, func() { s.expire(inst, gen) })
		}
	}
	delete(s.sessions, ss)
	s.mu.Unlock()
	for _, e := range moved {
		e.syncTransport(s)
	}
	if wentOffline != "" {
		s.seen(wentOffline, offlineAt)
	}
}

// expire unregisters an instance whose grace ran out without a hello.
// With a shared state.ConnectorRegistry, an instance that connected to another
// replica since is only released here (connectors.go).
func (s *Server) expire(inst *instance, gen uint64) {
	s.mu.Lock()
	offline := inst.offline
	s.mu.Unlock()
	elsewhere := s.aliveElsewhere(inst.id, offline)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || inst.gen != gen || inst.live > 0 || s.instances[inst.id] != inst {
		return
	}
	if elsewhere {
		s.log.Info("dataplane: connector_id offline here past the grace but connected elsewhere; releasing its channels here", "connector_id", inst.id, "channels", len(inst.channels))
		s.releaseInstanceLocked(inst)
		return
	}
	s.log.Info("dataplane: connector_id offline past the grace; dropping its channels", "connector_id", inst.id, "channels", len(inst.channels))
	s.dropInstanceLocked(inst)
	if s.sharedConnectors() != nil {
		s.dropWG.Add(1)
		go func() { defer s.dropWG.Done(); s.forgetShared(inst.id) }()
	}
}

// dropInstanceLocked forgets an instance and closes its channels in the
// background (Channel.Close waits for Target calls).
func (s *Server) dropInstanceLocked(inst *instance) {
	delete(s.instances, inst.id)
	if inst.grace != nil {
		inst.grace.Stop()
		inst.grace = nil
	}
	for _, e := range inst.channels {
		s.dropChannelLocked(e)
	}
}

// forgetTries is how often a drop asks the Registry to forget the ID
// before it gives up (logged): the ID then stays registered, and a reopen
// of it finds the channel again (see OnChannelReopen).
const forgetTries = 3

// forgetTimeout bounds one Registry.Forget of forget.
const forgetTimeout = 5 * time.Second

// forget removes id from the Registry, trying forgetTries times: a
// transient store error must not keep the ID for good. Each try gets
// forgetTimeout, so an unreachable store holds no caller for long.
func (s *Server) forget(id string) {
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), forgetTimeout)
		err := s.cfg.Registry.Forget(ctx, id)
		cancel()
		if err == nil {
			return
		}
		if try == forgetTries {
			s.log.Warn("dataplane: channel ID not forgotten by the registry", "connector_channel_id", id, "tries", try, "err", err)
			return
		}
	}
}

// ambiguousForgetTimeout bounds forgetAmbiguous.
const ambiguousForgetTimeout = time.Second

// forgetAmbiguous forgets an ID whose Register failed otherwise than by a
// refusal: the store may have committed it all the same (a connection
// lost during COMMIT), and an ID of no channel would hold a place under
// the registry's cap for good. One short try, so that a failing store
// holds the refused open no longer than that.
func (s *Server) forgetAmbiguous(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), ambiguousForgetTimeout)
	defer cancel()
	if err := s.cfg.Registry.Forget(ctx, id); err != nil {
		s.log.Warn("dataplane: a channel ID whose registration failed may stay registered", "connector_channel_id", id, "err", err)
	}
}

// dropChannelLocked drops a channel for good (a rare path: grace expiry
// or eviction). From here until the Registry forgot it, the ID is in
// s.dropping, so a channel.open of it gets a new ID (W5) as it will
// after the Forget; the store calls run in the drop's goroutine, never
// under s.mu, so a slow store stalls no hello.
func (s *Server) dropChannelLocked(e *channelEntry) {
	delete(e.inst.channels, e.id)
	delete(s.channels, e.id)
	s.drops++
	done := make(chan struct{})
	if old := s.dropping[e.id]; old == nil {
		s.dropping[e.id] = done
	}
	s.dropWG.Add(1)
	go func() {
		defer s.dropWG.Done()
		// Gone for good: fail its pending user messages (S7). Drop
		// closes the Channel, which waits for a Target call in flight
		// and its completion record.
		_ = e.ch.Drop(context.Background())
		close(done)
		// The author's state (a binding) goes before the ID: see
		// OnChannelDrop.
		forget := true
		if s.cfg.OnChannelDrop != nil {
			if err := s.cfg.OnChannelDrop(e.id); err != nil {
				s.log.Warn("dataplane: dropped channel kept in the registry, its OnChannelDrop failed", "connector_channel_id", e.id, "err", err)
				forget = false
			}
		}
		if forget {
			s.forget(e.id)
		}
		s.mu.Lock()
		if s.dropping[e.id] == done {
			delete(s.dropping, e.id)
		}
		s.mu.Unlock()
	}()
}

// handoverCompleted copies the completed records of a channel ID this
// Server no longer holds to the new ID it issued for its reopen, before
// anything is routed to the new channel: the sender moves its pending
// finals there, and one already posted must be answered duplicate, not
// posted twice (dedup follows the message, not the ID).
//
// When old was dropped and its Drop still runs (a Target call in flight
// when its grace expired or it was evicted), the handover first waits
// for it, at most dropWait: the call's completion record lands on old,
// and a copy made before it would miss it. The wait holds up this
// connection's reads; it is a rare path, bounded, and a Target that
// honours its context ends at once, since Close cancels it.
func (s *Server) handoverCompleted(ctx context.Context, old, id string) {
	s.mu.Lock()
	done := s.dropping[old]
	s.mu.Unlock()
	if done != nil {
		// On the Channels' clock, as the Target call it waits for is.
		expired := make(chan struct{})
		timer := s.opts.Clock.AfterFunc(s.dropWait(), func() { close(expired) })
		s.log.Info("dataplane: waiting for the dropped channel's delivery to end before the handover", "old_connector_channel_id", short(old), "connector_channel_id", id)
		select {
		case <-done:
		case <-expired:
			s.log.Warn("dataplane: the dropped channel's delivery did not end in time; handing over what is recorded", "old_connector_channel_id", short(old), "connector_channel_id", id)
		case <-ctx.Done():
		}
		timer.Stop()
	}
	// Bounded: it runs on the connection's reader, and a database that
	// stopped answering must not hold the connection (storefault.go).
	ctx, cancel := context.WithTimeout(ctx, openStoreTimeout)
	defer cancel()
	if err := s.opts.Completed.Handover(ctx, old, id); err != nil {
		s.log.Warn("dataplane: completed records not handed over; a resend may be posted again", "old_connector_channel_id", short(old), "connector_channel_id", id, "err", err)
	}
}

// dropWait bounds how long a handover waits for a dropped channel's
// Drop: one Target call (Options.TargetTimeout) and the store call that
// records it.
func (s *Server) dropWait() time.Duration {
	t := s.opts.TargetTimeout
	if t <= 0 {
		t = time.Minute // imv2.Options' default TargetTimeout
	}
	return t + 10*time.Second
}

// syncTransport gives the Channel the transport of its current owner (nil
// when it has none). Calls are serialised per channel and re-read the
// owner, so a late detach can never undo a newer reopen.
func (e *channelEntry) syncTransport(s *Server) {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	s.mu.Lock()
	owner := e.owner
	s.mu.Unlock()
	if owner == e.applied {
		return
	}
	e.applied = owner
	if owner == nil {
		e.ch.SetTransport(nil)
		return
	}
	e.ch.SetTransport(owner.transport(e))
}
