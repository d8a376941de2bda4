package dataplane

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
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
	// DefaultMaxConnectors bounds the connector_id instances kept. A hello
	// that needs a new one beyond it evicts the instance offline longest;
	// when all are online it is refused with connector_id_mismatch.
	DefaultMaxConnectors = 16
	// DefaultHelloTimeout closes a connection that completed no hello.
	DefaultHelloTimeout = 30 * time.Second
	// DefaultMaxHandlerCalls bounds concurrent AuthHandler and ToolHandler
	// calls per connection; further requests wait (backpressure).
	DefaultMaxHandlerCalls = 32
)

// ServerConfig configures a Server. Card and NewTarget are required.
type ServerConfig struct {
	// Card is the Connector Card: its connector_card_id must match each
	// hello (W4), its profiles are negotiated per channel (P3), its tools
	// and auth flows bound what is routed (W12).
	Card *imv2.Card
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
	// Clock drives the offline grace, hello timeout and keepalive.
	Clock imv2.Clock
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

	// Registry remembers issued channel IDs across restarts, so a reopen
	// with a stored ID finds the channel's durable state (W5, S8).
	// Default: a MemoryRegistry, which forgets on restart.
	Registry ChannelRegistry
	// OnChannelOpen is called for every channel.open about to be answered
	// with success, with the channel's ID. Do not block in it.
	OnChannelOpen func(channelID string)

	// OnChannelDrop is called after a channel was closed and forgotten
	// because its connector_id stayed offline past OfflineGrace (or was
	// evicted): the place to sign out of the target platform (Connector Architecture §3.4).
	OnChannelDrop func(channelID string)
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
	clock    imv2.Clock
	opts     imv2.Options
	upgrader websocket.Upgrader
	keyHash  [32]byte
	imTypes  map[string]bool
	cardTool map[string]bool
	cardFlow map[string]bool

	mu        sync.Mutex
	closed    bool
	instances map[string]*instance     // by connector_id
	channels  map[string]*channelEntry // by connector_channel_id, all instances
	sessions  map[*session]struct{}    // live connections
	wg        sync.WaitGroup           // sessions
	dropWG    sync.WaitGroup           // OnChannelDrop / Channel.Close after expiry
}

// instance is one connector_id: the channels it owns and its offline grace.
type instance struct {
	id       string
	live     int // hello-completed connections
	gen      uint64
	grace    imv2.Timer
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
		cfg.DisplayName = orDefault(cfg.Label, cfg.Provider)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = imv2.SystemClock{}
	}
	if cfg.Conn.Clock == nil {
		cfg.Conn.Clock = cfg.Clock
	}
	setInt(&cfg.MaxChannels, DefaultMaxChannels)
	if cfg.Registry == nil {
		cfg.Registry = NewMemoryRegistry(0)
	}
	setInt(&cfg.MaxConnectors, DefaultMaxConnectors)
	setInt(&cfg.MaxHandlerCalls, DefaultMaxHandlerCalls)
	setDur(&cfg.OfflineGrace, DefaultOfflineGrace)
	setDur(&cfg.HelloTimeout, DefaultHelloTimeout)

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
	for _, t := range cfg.Card.Tools {
		s.cardTool[t.ToolID] = true
	}
	for _, f := range cfg.Card.AuthFlows {
		s.cardFlow[f.ID] = true
	}
	if cfg.APIKey != "" {
		s.keyHash = sha256.Sum256([]byte(cfg.APIKey))
	}
	s.upgrader = websocket.Upgrader{
		Subprotocols: []string{imv2.Subprotocol},
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
	if s.cfg.APIKey != "" && !s.keyOK(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="xagent-connector"`)
		http.Error(w, "missing or invalid API key", http.StatusUnauthorized)
		return
	}
	if !slices.Contains(websocket.Subprotocols(r), imv2.Subprotocol) {
		http.Error(w, "WebSocket subprotocol "+imv2.Subprotocol+" required (W1)", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	}
	var slot batchSlot // the connection, for write coalescing
	ws, err := s.upgrader.Upgrade(slot.responseWriter(w), r, nil)
	if err != nil {
		s.log.Debug("dataplane: upgrade failed", "err", err)
		return // the upgrader has answered
	}
	_ = s.ServeConn(context.Background(), newBatchedWSConn(ws, slot.bc, s.cfg.Conn))
}

// keyOK compares the bearer key in constant time; hashing first makes the
// comparison independent of the key's length too.
func (s *Server) keyOK(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(h[len(prefix):]))
	return subtle.ConstantTimeCompare(got[:], s.keyHash[:]) == 1
}

// ServeConn serves one data-plane connection over any Conn (a WebSocket
// from ServeHTTP, or NewPipe in tests) until it ends or ctx is done. It
// closes conn before returning.
func (s *Server) ServeConn(ctx context.Context, conn Conn) error {
	ss := s.newSession(ctx, conn)
	if ss == nil {
		_ = conn.Close()
		return imv2.ErrClosed
	}
	return ss.run()
}

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
func (s *Server) Descriptor(ctx context.Context, channelID string) (*imv2.Descriptor, error) {
	s.mu.Lock()
	e := s.channels[channelID]
	s.mu.Unlock()
	if e == nil {
		return nil, imv2.Errorf(imv2.CodeConnectionNotFound, "channel %q is not known", channelID)
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
	p, err := imv2.NewPacket(imv2.TypeDescriptorPush, channelID, imv2.DescriptorPayload{ConnectionDescriptor: s.describe(ctx, e)})
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
func (s *Server) describe(ctx context.Context, e *channelEntry) *imv2.Descriptor {
	var info ChannelInfo
	if s.cfg.Describe != nil {
		info = s.cfg.Describe(ctx, e.id)
	}
	var tools []imv2.ToolState
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
	return &imv2.Descriptor{
		Schema: imv2.DescriptorSchema,
		Connection: imv2.Connection{
			ConnectorCardID:    s.cfg.Card.ConnectorCardID,
			ConnectorID:        e.inst.id,
			ConnectorChannelID: e.id,
			TargetType:         s.cfg.TargetType,
			Profiles:           neg.Profiles(),
			Status:             orDefault(info.Status, imv2.StatusCreated),
		},
		Target: imv2.DescriptorTarget{
			Provider:    s.cfg.Provider,
			Label:       s.cfg.Label,
			DisplayName: orDefault(info.DisplayName, s.cfg.DisplayName),
			AccountHint: info.AccountHint,
		},
		Tools: tools,
	}
}

// attach binds a session to the connector_id of its hello: the known
// instance (cancelling its offline grace) or a new one. A non-empty
// connector_id this server does not know (expired, or a restart) gets a
// new one, as Common Protocol §8.1 allows; xAgent then replaces its ConnectorClient.
func (s *Server) attach(ss *session, connectorID string) (*instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, imv2.ErrClosed
	}
	inst := s.instances[connectorID]
	if inst == nil {
		if len(s.instances) >= s.cfg.MaxConnectors && !s.evictInstanceLocked() {
			return nil, imv2.Errorf(imv2.CodeConnectorIDMismatch, "this Connector serves %d connector_ids, all online", s.cfg.MaxConnectors)
		}
		inst = &instance{id: "conn_" + uuid.NewString(), channels: map[string]*channelEntry{}}
		s.instances[inst.id] = inst
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

// evictInstanceLocked drops the instance offline longest; false if every
// instance is online.
func (s *Server) evictInstanceLocked() bool {
	var victim *instance
	for _, inst := range s.instances {
		if inst.live == 0 && (victim == nil || inst.offline.Before(victim.offline)) {
			victim = inst
		}
	}
	if victim == nil {
		return false
	}
	s.dropInstanceLocked(victim)
	return true
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
	if inst := ss.inst; inst != nil && s.instances[inst.id] == inst {
		inst.live--
		if inst.live == 0 {
			inst.gen++
			gen := inst.gen
			inst.offline = s.clock.Now()
			inst.grace = s.clock.AfterFunc(s.cfg.OfflineGrace, func() { s.expire(inst, gen) })
		}
	}
	delete(s.sessions, ss)
	s.mu.Unlock()
	for _, e := range moved {
		e.syncTransport(s)
	}
}

// expire unregisters an instance whose grace ran out without a hello.
func (s *Server) expire(inst *instance, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || inst.gen != gen || inst.live > 0 || s.instances[inst.id] != inst {
		return
	}
	s.log.Info("dataplane: connector_id offline past the grace; dropping its channels", "connector_id", inst.id, "channels", len(inst.channels))
	s.dropInstanceLocked(inst)
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

func (s *Server) dropChannelLocked(e *channelEntry) {
	delete(e.inst.channels, e.id)
	delete(s.channels, e.id)
	// Forget before anyone can reopen the ID (a rare path: grace expiry
	// or eviction), so a later channel.open gets a new ID (W5).
	if err := s.cfg.Registry.Forget(context.Background(), e.id); err != nil {
		s.log.Warn("dataplane: dropped channel not forgotten by the registry", "connector_channel_id", e.id, "err", err)
	}
	s.dropWG.Add(1)
	go func() {
		defer s.dropWG.Done()
		// Gone for good: fail its pending user messages, forget its
		// completed records (S7).
		_ = e.ch.Drop(context.Background())
		if s.cfg.OnChannelDrop != nil {
			s.cfg.OnChannelDrop(e.id)
		}
	}()
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

func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func setInt(n *int, def int) {
	if *n <= 0 {
		*n = def
	}
}

func setDur(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
