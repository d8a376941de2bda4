package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/defaults"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// Defaults of ClientAdvanced.
const (
	// DefaultReconnectMin and DefaultReconnectMax bound the exponential
	// backoff between reconnect attempts (W11); each delay is drawn from
	// [d/2, d] (jitter), so many clients do not reconnect in step.
	DefaultReconnectMin = 500 * time.Millisecond
	DefaultReconnectMax = 30 * time.Second
	// DefaultRequestTimeout bounds the dial and the wait for hello.ack and
	// each channel.open.ack of a (re)connect.
	DefaultRequestTimeout = 10 * time.Second
)

// ClientConfig configures the xAgent side of the data plane. URL and
// Target are required; every other setting has the default stated on it,
// and those an agent rarely sets are grouped in Advanced.
type ClientConfig struct {
	// URL is the Connector's base URL, http:// or https:// (maybe with a
	// path prefix), as registered with xAgent: Dial fetches the Card from
	// URL/connector-card.json and dials the data plane at URL/ws (ws:// or
	// wss://). A URL ending in /ws is refused. Required.
	URL string
	// APIKey, when set, is sent as "Authorization: Bearer <key>" (W1), on
	// the data plane and on uploads; default none (no header).
	APIKey string
	// Target is the agent side: it receives the user messages of every
	// channel (PostMessage gets the channel ID). Its return is the ack
	// (A4): return once the message is safely the agent's, and do the
	// agent's work elsewhere (see the package documentation). Required.
	Target imv2.Target
	// Store keeps the connector_id and the channel IDs to reopen; default
	// a state.MemoryChannelStore (gone with the process).
	Store state.ChannelStore
	// Options configure every Channel: the pending store (keep it durable
	// to lose no final across a restart), ack timeout, retries and the
	// outcome callbacks OnDelivered and OnFailed. Default: imv2's defaults,
	// with in-memory Pending and Completed stores the channels share; nil
	// Clock and Logger take Advanced.Clock and Logger.
	Options *imv2.Options
	// Logger receives connection events; nothing by default.
	Logger *slog.Logger
	// OnConnected is called after every successful connect (the first in
	// Dial and every reconnect) once the stored channels were reopened,
	// with the connector_id and the IDs now open. A reopen the Connector
	// refused for now (connector_channel_unavailable) is not among them: it
	// is retried on that connection with backoff, and not reported here.
	// Default none. Do not block in it.
	OnConnected func(connectorID string, channelIDs []string)
	// OnChannelReplaced is called when the Connector answered a reopen
	// of oldID with newID (it forgot the channel, W5): the Client's own
	// paths follow by themselves (Send, NewReply, unfinished Replies,
	// Upload, WaitOpen and the pending finals, S2); the callback is for
	// what the application keyed by the old ID. Default none. Do not
	// block.
	OnChannelReplaced func(oldID, newID string)
	// OnDescriptor is called with every Descriptor received: in
	// channel.open.ack and in connection.descriptor.push (a legacy v1 one
	// normalized); default none. Do not block.
	OnDescriptor func(channelID string, d *protocol.Descriptor)
	// Advanced holds the settings with a working default that an agent
	// rarely changes: the network, versions, backoff and bounds.
	Advanced ClientAdvanced
}

// ClientAdvanced is the part of ClientConfig an agent rarely sets; the
// zero value of every field is its stated default.
type ClientAdvanced struct {
	// CardID is the Card's connector_card_id, which the hello names and
	// the ack must echo; default the one the Card at URL names. Set it
	// only to insist on one: Dial then fails when the Card names another.
	CardID string
	// HTTPClient fetches the Card and sends uploads; default: a client
	// bounded by RequestTimeout for the Card, an unbounded one for uploads
	// (xfiles bounds a call without deadline).
	HTTPClient *http.Client
	// TLSConfig is the TLS configuration of wss:// connections (a private
	// CA, a client certificate); default the system's.
	TLSConfig *tls.Config
	// DialContext, when set, makes the network connection of the data
	// plane, as http.Transport's does (an in-memory network in tests, a
	// proxy); default a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// MinProtocolVersion and MaxProtocolVersion bound the Connector
	// versions admitted (W4): a hello.ack whose protocol_version lies
	// outside [min, max] fails the connect. The hello itself always carries
	// protocol.ProtocolVersion. Zero values default to protocol.Version30 both.
	MinProtocolVersion, MaxProtocolVersion protocol.Version
	// SupportedProfiles go in the hello, always explicitly (P3). Default:
	// the profiles of imv2.DefaultCatalog (xagent.im.v2).
	SupportedProfiles []string
	// Clock drives the reconnect, Dial, OpenChannel and Upload backoff
	// and keepalive; default the system clock. The bounds on socket I/O
	// (RequestTimeout, write and close) are wall-clock deadlines, as the
	// network needs.
	Clock clock.Clock
	// Conn tunes each WebSocket (read limit, write timeout, keepalive);
	// its zero fields take the defaults of ConnConfig (DefaultReadLimit
	// 1 MiB, DefaultWriteTimeout 10 s, DefaultPingInterval 30 s,
	// DefaultPongTimeout 15 s, DefaultCloseTimeout 2 s) and its Clock
	// the Clock above.
	Conn ConnConfig
	// WrapConn, when set, decorates every new connection (a fault
	// injector in a simulator, a recorder in a test); default none.
	WrapConn func(Conn) Conn
	// ReconnectMin, ReconnectMax bound the backoff of reconnects and of
	// the retries of Dial, OpenChannel and Upload: ReconnectMin doubling
	// up to ReconnectMax, each delay drawn from [d/2, d]. Defaults
	// DefaultReconnectMin (0.5 s) and DefaultReconnectMax (30 s).
	ReconnectMin, ReconnectMax time.Duration
	// MaxReconnectAttempts stops reconnecting after that many failures in
	// a row (Connector Architecture §10); Done is closed then. 0 (the
	// default) retries forever.
	MaxReconnectAttempts int
	// RequestTimeout bounds the dial, the hello and each channel.open;
	// default DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration
	// MaxChannels bounds the channels held; default DefaultMaxChannels
	// (1,000).
	MaxChannels int
}

// Client is the xAgent side of the data plane. It dials the Connector, says
// hello, opens channels and serves each with an imv2.Channel in the xAgent
// role, and on a lost connection reconnects by itself with backoff and
// jitter: hello with the last connector_id, then channel.open for every
// stored channel ID, then the Channel gets the new transport and resends
// its pending finals, and nothing already acknowledged (W11, S10).
type Client struct {
	cfg        ClientConfig
	base       string         // the Connector's base URL, for uploads
	uploadHTTP *http.Client   // for uploads
	card       *protocol.Card // as fetched by Dial
	log        *slog.Logger
	clock      clock.Clock
	opts       imv2.Options
	imTypes    map[string]bool

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}

	negMu     sync.Mutex
	lastOffer []string         // guarded by negMu: the profiles of the last descriptor …
	lastNeg   *imv2.Negotiated // … and their negotiated set, shared by the channels

	deliveries deliveries // the open Delivery handles of Send and Reply.Final
	activity   activities // the newest activity of each channel, by reply

	mu          sync.Mutex
	closed      bool
	err         error       // why the client stopped
	conn        *clientConn // current connection, nil while disconnected
	connectorID string
	version     protocol.Version // of the last hello.ack
	channels    map[string]*clientChannel
	// changed is closed and replaced whenever the connection or a
	// channel's attachment changes, so WaitOpen can wait without polling.
	changed chan struct{}
	// replaced maps a channel ID the Connector replaced to its successor
	// (W5); at most MaxChannels entries, the oldest forgotten first
	// (replacedOrder), so a Connector replacing IDs in a loop cannot
	// grow it.
	replaced      map[string]string
	replacedOrder []string
}

type clientChannel struct {
	id     string
	ch     *imv2.Channel
	neg    *imv2.Negotiated
	conn   *clientConn // the connection it is open on; guarded by Client.mu
	closed bool        // CloseChannel took it out of routing; guarded by Client.mu
}

// clientConn is one connection and its outstanding requests.
type clientConn struct {
	c       *Client
	conn    Conn
	mu      sync.Mutex
	waiters map[string]*waiter // by request_id
	dead    chan struct{}      // closed when the read loop ended
	isDead  bool
}

type waiter struct {
	onReply func(*imv2.Packet) // runs on the read loop, before the next packet
	res     chan *imv2.Packet
}

// Dial connects to the Connector, completes the hello and reopens every
// channel in the store, then keeps the connection up in the background
// until Close. A failure for now — the Connector not listening, an HTTP
// 408, 429 or 5xx, a hello without answer or refused for now
// (connector_id_mismatch while the connector_id is still held by a dead
// connection, connector_channel_unavailable) — is retried with the reconnect
// backoff (ReconnectMin doubling up to ReconnectMax, with jitter) until
// ctx ends; then the last failure is returned with ctx's error. A refusal
// — a Card that does not validate, a wrong key, a hello.ack this side
// does not admit — is returned at once.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.URL == "" || cfg.Target == nil {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: ClientConfig needs URL and Target")
	}
	base, err := baseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Advanced.MinProtocolVersion == (protocol.Version{}) {
		cfg.Advanced.MinProtocolVersion = protocol.Version30
	}
	if cfg.Advanced.MaxProtocolVersion == (protocol.Version{}) {
		cfg.Advanced.MaxProtocolVersion = protocol.Version30
	}
	if cfg.Advanced.MaxProtocolVersion.Compare(cfg.Advanced.MinProtocolVersion) < 0 {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: ClientConfig MaxProtocolVersion %s is below MinProtocolVersion %s", cfg.Advanced.MaxProtocolVersion, cfg.Advanced.MinProtocolVersion)
	}
	defaults.Set(&cfg.Advanced.RequestTimeout, DefaultRequestTimeout)
	// Uploads take as long as the file needs (xfiles bounds a call
	// without deadline): not the Card fetch's RequestTimeout.
	uploadHTTP := cfg.Advanced.HTTPClient
	if uploadHTTP == nil {
		uploadHTTP = &http.Client{}
	}
	if cfg.Advanced.HTTPClient == nil {
		cfg.Advanced.HTTPClient = &http.Client{Timeout: cfg.Advanced.RequestTimeout}
	}
	if cfg.Advanced.Clock == nil {
		cfg.Advanced.Clock = clock.System{}
	}
	defaults.Set(&cfg.Advanced.ReconnectMin, DefaultReconnectMin)
	defaults.Set(&cfg.Advanced.ReconnectMax, DefaultReconnectMax)
	if cfg.Advanced.ReconnectMax < cfg.Advanced.ReconnectMin {
		cfg.Advanced.ReconnectMax = cfg.Advanced.ReconnectMin
	}
	for attempt := 1; ; attempt++ {
		c, err := dialOnce(ctx, cfg, base, uploadHTTP)
		if err == nil || !imv2.SafeToRetry(err) {
			return c, err
		}
		if werr := sleepUntil(ctx, cfg.Advanced.Clock, backoff(cfg.Advanced.ReconnectMin, cfg.Advanced.ReconnectMax, attempt)); werr != nil {
			return nil, fmt.Errorf("%w (after %d attempts; the last: %w)", werr, attempt, err)
		}
	}
}

// dialOnce is one attempt of Dial.
func dialOnce(ctx context.Context, cfg ClientConfig, base *url.URL, uploadHTTP *http.Client) (*Client, error) {
	card, err := FetchCard(ctx, cfg.Advanced.HTTPClient, base.String())
	if err != nil {
		return nil, err
	}
	if cfg.Advanced.CardID != "" && cfg.Advanced.CardID != card.ConnectorCardID {
		return nil, imv2.Errorf(protocol.CodeConnectorCardIDMismatch, "dataplane: the Card at %s is %q, want %q", base, short(card.ConnectorCardID), cfg.Advanced.CardID)
	}
	cfg.Advanced.CardID = card.ConnectorCardID
	// From here on cfg.URL is the data-plane endpoint the connects dial.
	cfg.URL = dataPlaneURL(base)
	if cfg.Advanced.SupportedProfiles == nil {
		for id := range imv2.DefaultCatalog() {
			cfg.Advanced.SupportedProfiles = append(cfg.Advanced.SupportedProfiles, id)
		}
		slices.Sort(cfg.Advanced.SupportedProfiles)
	}
	if cfg.Store == nil {
		cfg.Store = state.NewMemoryChannelStore(0)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Advanced.Conn.Clock == nil {
		cfg.Advanced.Conn.Clock = cfg.Advanced.Clock
	}
	defaults.Set(&cfg.Advanced.MaxChannels, DefaultMaxChannels)

	c := &Client{
		cfg:        cfg,
		base:       base.String(),
		uploadHTTP: uploadHTTP,
		card:       card,
		log:        cfg.Logger,
		clock:      cfg.Advanced.Clock,
		imTypes:    profilePacketTypes(),
		done:       make(chan struct{}),
		channels:   map[string]*clientChannel{},
		changed:    make(chan struct{}),
		replaced:   map[string]string{},
	}
	if cfg.Options != nil {
		c.opts = *cfg.Options
	}
	if c.opts.Clock == nil {
		c.opts.Clock = cfg.Advanced.Clock
	}
	if c.opts.Logger == nil {
		c.opts.Logger = cfg.Logger
	}
	sharedStores(&c.opts)
	c.hookDeliveries()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.connectorID, err = cfg.Store.ConnectorID(ctx); err != nil {
		c.cancel()
		return nil, err
	}
	cc, err := c.connect(ctx)
	if err != nil {
		c.cancel()
		c.wg.Wait()
		return nil, err
	}
	ids, _ := c.reopenAll(ctx, cc)
	c.wg.Add(1)
	go c.run(cc)
	if cfg.OnConnected != nil {
		cfg.OnConnected(c.ConnectorID(), ids)
	}
	return c, nil
}

func (c *Client) wrap(conn Conn) Conn {
	if c.cfg.Advanced.WrapConn != nil {
		return c.cfg.Advanced.WrapConn(conn)
	}
	return conn
}

// connect dials, starts the read loop and completes the hello (W3, W4).
func (c *Client) connect(ctx context.Context) (*clientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Advanced.RequestTimeout)
	defer cancel()
	d := websocket.Dialer{TLSClientConfig: c.cfg.Advanced.TLSConfig, NetDialContext: c.cfg.Advanced.DialContext}
	d.Subprotocols = []string{protocol.Subprotocol}
	var slot batchSlot // the connection, for write coalescing
	d = slot.dialer(d)
	h := http.Header{}
	if c.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	ws, resp, err := d.DialContext(ctx, c.cfg.URL, h)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("dataplane: dial %s: HTTP %d: %w", c.cfg.URL, resp.StatusCode, err)
			if retryStatus(resp.StatusCode) {
				return nil, imv2.NotPosted(err)
			}
			return nil, err
		}
		return nil, imv2.NotPosted(fmt.Errorf("dataplane: dial %s: %w", c.cfg.URL, err))
	}
	if ws.Subprotocol() != protocol.Subprotocol {
		_ = ws.Close()
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: the Connector did not select subprotocol %s (W1)", protocol.Subprotocol)
	}
	cc := &clientConn{
		c:       c,
		conn:    c.wrap(NewLoggingConn(newBatchedWSConn(ws, slot.bc, c.cfg.Advanced.Conn), c.log)),
		waiters: map[string]*waiter{},
		dead:    make(chan struct{}),
	}
	c.wg.Add(1)
	go cc.readLoop()

	c.mu.Lock()
	prev := c.connectorID
	c.mu.Unlock()
	hello, err := imv2.NewPacket(protocol.TypeConnectorHello, "", protocol.ConnectorHello{
		ConnectorCardID:   c.cfg.Advanced.CardID,
		ConnectorID:       prev,
		ProtocolVersion:   protocol.ProtocolVersion,
		SupportedProfiles: c.cfg.Advanced.SupportedProfiles,
	})
	if err != nil {
		_ = cc.conn.Close()
		return nil, err
	}
	r, err := cc.request(ctx, hello, nil)
	if err != nil {
		_ = cc.conn.Close()
		err = fmt.Errorf("dataplane: hello: %w", err)
		if r == nil || helloLater(r.Err()) {
			err = imv2.NotPosted(err) // no answer, or one saying "later"
		}
		return nil, err
	}
	var ack protocol.ConnectorHelloAck
	if err := r.DecodePayload(&ack); err != nil {
		_ = cc.conn.Close()
		return nil, err
	}
	switch {
	case r.Type != protocol.TypeConnectorHelloAck:
		err = imv2.Errorf(imv2.CodeInvalidPacket, "hello answered with %q", r.Type)
	case ack.ConnectorCardID != c.cfg.Advanced.CardID:
		err = imv2.Errorf(protocol.CodeConnectorCardIDMismatch, "hello.ack names connector_card_id %q, want %q", short(ack.ConnectorCardID), c.cfg.Advanced.CardID)
	case ack.ConnectorID == "":
		err = imv2.Errorf(imv2.CodeInvalidPacket, "hello.ack has no connector_id (W4)")
	}
	var version protocol.Version
	if err == nil {
		version, err = c.admitVersion(ack.ProtocolVersion)
	}
	if err != nil {
		_ = cc.conn.Close()
		return nil, err
	}
	if prev != "" && prev != ack.ConnectorID {
		c.log.Info("dataplane: the Connector issued a new connector_id; stored channels may get new IDs", "old_connector_id", prev, "connector_id", ack.ConnectorID)
	}
	if err := c.cfg.Store.SetConnectorID(ctx, ack.ConnectorID); err != nil {
		c.log.Warn("dataplane: connector_id not stored", "err", err)
	}
	c.mu.Lock()
	c.connectorID = ack.ConnectorID
	c.version = version
	c.conn = cc
	c.notifyLocked()
	c.mu.Unlock()
	return cc, nil
}

// run keeps the client connected until Close or until it gives up.
func (c *Client) run(cc *clientConn) {
	defer c.wg.Done()
	defer close(c.done)
	for {
		select {
		case <-cc.dead:
		case <-c.ctx.Done():
			_ = cc.conn.Close()
			<-cc.dead
			c.disconnected(cc)
			return
		}
		c.disconnected(cc)
		if cc = c.reconnect(); cc == nil {
			return
		}
	}
}

// disconnected takes the transport away from every channel of cc: their
// pending messages stay pending (A5).
func (c *Client) disconnected(cc *clientConn) {
	_ = cc.conn.Close()
	c.mu.Lock()
	if c.conn == cc {
		c.conn = nil
	}
	var lost []*clientChannel
	for _, e := range c.channels {
		if e.conn == cc {
			e.conn = nil
			lost = append(lost, e)
		}
	}
	c.notifyLocked()
	c.mu.Unlock()
	for _, e := range lost {
		e.ch.SetTransport(nil)
	}
	if c.ctx.Err() == nil {
		c.log.Info("dataplane: connection lost; reconnecting", "channels", len(lost))
	}
}

// reconnect retries with exponential backoff and jitter (W11) until a
// connect succeeds, the client closes, or MaxReconnectAttempts fail.
func (c *Client) reconnect() *clientConn {
	for attempt := 1; ; attempt++ {
		if limit := c.cfg.Advanced.MaxReconnectAttempts; limit > 0 && attempt > limit {
			c.mu.Lock()
			c.err = imv2.Errorf(imv2.CodeClosed, "dataplane: gave up after %d reconnect attempts", limit)
			c.mu.Unlock()
			c.log.Error("dataplane: giving up reconnecting", "attempts", limit)
			return nil
		}
		if !c.sleep(c.backoff(attempt)) {
			return nil
		}
		cc, err := c.connect(c.ctx)
		if err != nil {
			c.log.Info("dataplane: reconnect failed", "attempt", attempt, "err", err)
			continue
		}
		ids, unanswered := c.reopenAll(c.ctx, cc)
		if unanswered {
			// A channel.open that got no answer leaves its channel without a
			// transport on a live connection, where nothing would retry it:
			// start over, so every stored channel is reopened (W11).
			c.log.Info("dataplane: a reopen got no answer; reconnecting", "attempt", attempt)
			_ = cc.conn.Close()
			<-cc.dead
			c.disconnected(cc)
			continue
		}
		if c.cfg.OnConnected != nil {
			c.cfg.OnConnected(c.ConnectorID(), ids)
		}
		return cc
	}
}

// backoff returns the delay before reconnect attempt n: ReconnectMin
// doubled per attempt, capped at ReconnectMax, drawn from [d/2, d].
func (c *Client) backoff(n int) time.Duration {
	return backoff(c.cfg.Advanced.ReconnectMin, c.cfg.Advanced.ReconnectMax, n)
}

func backoff(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// helloLater reports whether a refused hello may succeed later: a
// refusal marked retryable, connector_channel_unavailable (the
// Connector's store is away), or connector_id_mismatch, which a Server
// answers while the connector_id is still held by a connection that died
// unnoticed (a killed xAgent's) or while every slot is taken.
func helloLater(e *imv2.Error) bool {
	return e.Retryable || e.Code == imv2.CodeChannelUnavailable || e.Code == protocol.CodeConnectorIDMismatch
}

// sleepUntil waits d on clk; ctx's error if ctx ends first.
func sleepUntil(ctx context.Context, clk clock.Clock, d time.Duration) error {
	fired := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sleep waits d on the client's clock; false if the client closed first.
func (c *Client) sleep(d time.Duration) bool {
	fired := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-c.ctx.Done():
		t.Stop()
		return false
	}
}

// reopenAll opens every stored channel with its stored ID (W11) and
// returns the IDs now open (a Connector that no longer knows an ID
// assigns a new one, W5), and whether a reopen timed out without answer.
// A reopen the Connector refused for now (connector_channel_unavailable:
// its store is away, the channel is busy elsewhere) is retried in the
// background with backoff while cc lives (retryOpens); OnConnected does
// not wait for it.
func (c *Client) reopenAll(ctx context.Context, cc *clientConn) (open []string, unanswered bool) {
	ids, err := c.cfg.Store.ChannelIDs(ctx)
	if err != nil {
		c.log.Warn("dataplane: channel store", "err", err)
		return nil, false
	}
	var refused []string
	for _, id := range ids {
		e, retry, err := c.openOnce(ctx, cc, id)
		if err != nil {
			c.log.Warn("dataplane: reopen failed", "connector_channel_id", id, "err", err)
			unanswered = unanswered || errors.Is(err, context.DeadlineExceeded)
			if retry {
				refused = append(refused, id)
			}
			continue
		}
		open = append(open, e.id)
	}
	if len(refused) > 0 && !unanswered { // else the reconnect reopens them
		c.retryOpens(cc, refused)
	}
	return open, unanswered
}

// retryOpens reopens the stored channels ids, refused for now, on cc with
// backoff on the client's clock (ReconnectMin doubling up to
// ReconnectMax, with jitter) until each is open or refused otherwise, or
// cc ends (the reconnect then reopens every stored channel). A channel
// removed from the store meanwhile (CloseChannel) is not reopened. A
// reopen that gets no answer closes cc, as in reconnect: the channel
// must not stay detached on a live connection.
func (c *Client) retryOpens(cc *clientConn, ids []string) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for attempt := 1; len(ids) > 0; attempt++ {
			if !c.sleepOn(cc, c.backoff(attempt)) {
				return
			}
			stored, err := c.cfg.Store.ChannelIDs(c.ctx)
			if err != nil {
				c.log.Warn("dataplane: channel store", "err", err)
				continue
			}
			var again []string
			for _, id := range ids {
				if !slices.Contains(stored, id) {
					continue
				}
				e, retry, err := c.openOnce(c.ctx, cc, id)
				switch {
				case err == nil:
					c.log.Info("dataplane: channel reopened after a refusal", "connector_channel_id", e.id, "attempt", attempt)
				case errors.Is(err, context.DeadlineExceeded):
					c.log.Info("dataplane: a reopen got no answer; reconnecting", "connector_channel_id", id)
					_ = cc.conn.Close()
					return
				case retry:
					again = append(again, id)
				default:
					c.log.Warn("dataplane: reopen failed", "connector_channel_id", id, "err", err)
				}
			}
			ids = again
		}
	}()
}

// sleepOn waits d on the client's clock; false if the client closed or
// cc ended first.
func (c *Client) sleepOn(cc *clientConn, d time.Duration) bool {
	fired := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-cc.dead:
	case <-c.ctx.Done():
	}
	t.Stop()
	return false
}

// OpenChannel opens a channel and returns its ID: id "" asks the
// Connector for a new one, a stored id reopens it (the Connector may answer
// with a new ID, W5: answer under the returned one). The ID is stored so
// reconnects reopen it. Answer through the Client — Send, NewReply,
// Upload — which follows a channel the Connector replaces later and
// reports outcomes. While disconnected it waits for the reconnect; a
// refusal for now (connector_channel_unavailable), a lost connection or an
// open without answer (RequestTimeout) is retried with the reconnect
// backoff until ctx ends, which returns ctx's error with the last failure.
// A refusal (an ack this side does not admit, the channel limit) is
// returned at once. A retried open of a new channel whose first answer was
// lost may leave that first channel unused at the Connector.
func (c *Client) OpenChannel(ctx context.Context, id string) (string, error) {
	var last error
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := c.sleepCtx(ctx, c.backoff(attempt-1)); err != nil {
				return "", fmt.Errorf("%w (open retried %d times; the last failure: %w)", err, attempt-1, last)
			}
		}
		cc, err := c.waitConn(ctx)
		if err != nil {
			if last != nil {
				return "", fmt.Errorf("%w (the last failure: %w)", err, last)
			}
			return "", err
		}
		e, retry, err := c.openOnce(ctx, cc, id)
		if err == nil {
			return e.id, nil
		}
		if ctx.Err() != nil || c.ctx.Err() != nil {
			return "", err
		}
		if !retry && !cc.lost() && !errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		last = err
	}
}

// waitConn returns the current connection, waiting for the reconnect
// while there is none.
func (c *Client) waitConn(ctx context.Context) (*clientConn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, imv2.ErrClosed
		}
		cc, changed := c.conn, c.changed
		c.mu.Unlock()
		if cc != nil {
			return cc, nil
		}
		select {
		case <-changed:
		case <-c.done:
			if err := c.Err(); err != nil {
				return nil, err
			}
			return nil, imv2.ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// lost reports whether cc's read loop ended.
func (cc *clientConn) lost() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.isDead
}

// openOnce sends one channel.open; retry reports that the Connector
// refused it with connector_channel_unavailable, a refusal for now that
// the same request may overcome later (its store was away, the channel
// was busy). Errors this side finds in an ack are never retried.
func (c *Client) openOnce(ctx context.Context, cc *clientConn, requested string) (_ *clientChannel, retry bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Advanced.RequestTimeout)
	defer cancel()
	p, err := imv2.NewPacket(protocol.TypeChannelOpen, requested, nil)
	if err != nil {
		return nil, false, err
	}
	var (
		e    *clientChannel
		oerr error
	)
	r, err := cc.request(ctx, p, func(r *imv2.Packet) { e, oerr = c.applyOpen(cc, requested, r) })
	if err != nil {
		refused := r != nil && r.Err() != nil && r.Err().Code == imv2.CodeChannelUnavailable
		return nil, refused, err
	}
	return e, false, oerr
}

// applyOpen runs on the read loop when channel.open.ack arrives, before
// any later packet is read: it creates or reattaches the Channel and gives
// it the transport, so the pending finals it resends and the packets the
// Connector sends after the ack all find it ready (S10).
func (c *Client) applyOpen(cc *clientConn, requested string, r *imv2.Packet) (*clientChannel, error) {
	if err := r.Err(); err != nil {
		return nil, err
	}
	var ack protocol.ChannelOpenAck
	if err := r.DecodePayload(&ack); err != nil {
		return nil, err
	}
	// A copy: the envelope's strings share one array (the fast decoder's),
	// which the Channel, the channels map and the Store would otherwise
	// keep for the channel's life (160 B for the ID's 40).
	id := strings.Clone(r.ConnectorChannelID)
	d := ack.ConnectionDescriptor
	d.Normalize() // a legacy v1 Descriptor (Common Protocol §12)
	switch {
	case r.Type != protocol.TypeChannelOpenAck:
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "channel.open answered with %q", r.Type)
	case id == "" || ack.ConnectorChannelID != id:
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "channel.open.ack: envelope and payload connector_channel_id differ or are empty (W5)")
	case len(id) > imv2.MaxIDBytes:
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "channel.open.ack: connector_channel_id is over %d bytes", imv2.MaxIDBytes)
	case d == nil:
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "channel.open.ack: connection_descriptor is missing (W5)")
	case d.Connection.ConnectorChannelID != id || d.Connection.ConnectorCardID != c.cfg.Advanced.CardID:
		return nil, imv2.Errorf(protocol.CodeChannelConnectorMismatch, "channel.open.ack: the descriptor names another channel or Card")
	}
	neg := c.negotiate(d.Connection.Profiles)
	if len(neg.Profiles()) == 0 {
		return nil, imv2.Errorf(imv2.CodeChannelUnavailable, "channel.open.ack: no profile this client supports and the Card declares is enabled (P2, P3)")
	}

	c.mu.Lock()
	e := c.channels[id]
	c.mu.Unlock()
	replacing := requested != "" && requested != id
	if e == nil {
		ch, err := imv2.NewChannel(id, imv2.RoleXAgent, neg, nil, c.cfg.Target, &c.opts)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		held := len(c.channels)
		if replacing && c.channels[requested] != nil {
			held-- // the one this replaces goes below
		}
		switch {
		case c.closed:
			err = imv2.ErrClosed
		case held >= c.cfg.Advanced.MaxChannels:
			err = imv2.Errorf(imv2.CodeChannelUnavailable, "dataplane: %d channels, the limit", c.cfg.Advanced.MaxChannels)
		}
		if err != nil {
			c.mu.Unlock()
			_ = ch.Close()
			return nil, err
		}
		e = &clientChannel{id: id, ch: ch, neg: neg}
		c.channels[id] = e
		c.mu.Unlock()
	} else if !neg.Equal(e.neg) {
		e.ch.Renegotiate(neg) // P5
		c.mu.Lock()
		e.neg = neg
		c.mu.Unlock()
	}
	if err := c.cfg.Store.AddChannel(c.ctx, id); err != nil {
		c.log.Warn("dataplane: channel not stored; it will not be reopened", "connector_channel_id", id, "err", err)
	}
	// The successor is in the map before the old ID leaves it and maps to
	// it, in one hold of the lock: whoever resolves the old ID from now on
	// finds a channel.
	var old *clientChannel
	c.mu.Lock()
	e.conn, e.closed = cc, false
	c.forgetReplacedLocked(id) // live again: no longer a replaced ID
	if replacing {
		old = c.channels[requested]
		delete(c.channels, requested)
		c.recordReplacedLocked(requested, id)
	}
	c.notifyLocked()
	c.mu.Unlock()
	if replacing {
		c.log.Info("dataplane: channel reopened under a new ID", "old_connector_channel_id", requested, "connector_channel_id", id)
		if err := c.cfg.Store.RemoveChannel(c.ctx, requested); err != nil {
			c.log.Warn("dataplane: channel store", "err", err)
		}
	}
	e.ch.SetTransport(cc.transport(e))
	if old != nil {
		c.handover(old, e)
	}
	if replacing {
		c.activity.move(requested, id)
	}
	if replacing && c.cfg.OnChannelReplaced != nil {
		c.cfg.OnChannelReplaced(requested, id)
	}
	if c.cfg.OnDescriptor != nil {
		c.cfg.OnDescriptor(id, d)
	}
	return e, nil
}

// negotiate returns the negotiated set of a descriptor's profiles and
// the client's. A profile the Card's supports.profiles does not declare is
// never enabled, whatever the Descriptor says: a Descriptor may declare
// only what its Card declares (P2, K1). Descriptors of one Connector name
// the same profiles, so the last result is reused: channels share one
// immutable Negotiated instead of holding a copy each.
func (c *Client) negotiate(offered []string) *imv2.Negotiated {
	c.negMu.Lock()
	defer c.negMu.Unlock()
	if c.lastNeg == nil || !slices.Equal(offered, c.lastOffer) {
		c.lastOffer = slices.Clone(offered)
		declared := make([]string, 0, len(offered))
		for _, id := range offered {
			if slices.Contains(c.card.Supports.Profiles, id) {
				declared = append(declared, id)
			} else {
				c.log.Warn("dataplane: the descriptor enables a profile its Card does not declare; ignored (P2)", "profile", short(id))
			}
		}
		c.lastNeg = imv2.DefaultCatalog().Negotiate(declared, c.cfg.Advanced.SupportedProfiles)
	}
	return c.lastNeg
}

// handover moves the pending finals of a channel the Connector no longer
// knows to the channel that replaced it (same message_id and content, S2),
// off the read loop: closing the old Channel waits for its Target calls.
func (c *Client) handover(old, e *clientChannel) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		moved, err := old.ch.Handover(c.ctx)
		if err != nil {
			c.log.Warn("dataplane: pending finals of the old channel not all moved", "connector_channel_id", old.id, "err", err)
		}
		for _, m := range moved {
			c.deliveries.move(old.id, e.id, m.MessageID) // before an ack can come
			if _, err := e.ch.Send(c.ctx, m); err != nil {
				c.deliveries.move(e.id, old.id, m.MessageID)
				c.opts.OnFailed(old.id, m, imv2.Errorf(imv2.CodeChannelNotOpen, "final %q of channel %q could not follow it to %q (%v): %w", m.MessageID, old.id, e.id, err, ErrChannelReplaced))
			}
		}
	}()
}

// CloseChannel sends channel.close: the channel stops routing, leaves the
// store (it is not reopened on reconnect) and keeps its Channel, pending
// included, for a later OpenChannel with the same ID (W6).
func (c *Client) CloseChannel(ctx context.Context, id string) error {
	cc := c.current()
	if cc == nil {
		return imv2.Errorf(imv2.CodeChannelUnavailable, "dataplane: not connected")
	}
	c.mu.Lock()
	id = c.resolveLocked(id)
	e := c.channels[id]
	if e != nil {
		if e.conn == cc {
			e.conn = nil
		}
		e.closed = true
		c.notifyLocked()
	}
	c.mu.Unlock()
	if e == nil {
		return imv2.Errorf(imv2.CodeChannelNotOpen, "channel %q is not known", id)
	}
	e.ch.SetTransport(nil)
	if err := c.cfg.Store.RemoveChannel(ctx, id); err != nil {
		return err
	}
	p, err := imv2.NewPacket(protocol.TypeChannelClose, id, nil)
	if err != nil {
		return err
	}
	_, err = cc.request(ctx, p, nil)
	return err
}

// Request sends a request packet (auth.*, tool.invoke,
// connection.descriptor.get …) on the current connection and returns its
// answer, matched by request_id (a fresh one is set when empty). An
// answer carrying an error (a type "error" packet or an ack's envelope
// error) is returned together with that error as an *imv2.Error.
//
// Only what the Common Protocol lets xAgent request and what the
// channel's negotiated catalog lets travel to the Connector is sent
// (profile §1, P7: internal xAgent signals such as session.sync_message
// never reach the wire); anything else is refused with
// unsupported_packet before it is written. connector.hello is the
// Client's. A profile packet sent here bypasses the Channel (no pending
// entry, no resend, no numbering): answer with NewReply, Reply and Send;
// Request is for a hand-made packet, such as a resend provoking a
// duplicate in a test.
func (c *Client) Request(ctx context.Context, p *imv2.Packet) (*imv2.Packet, error) {
	if err := c.mayRequest(p); err != nil {
		return nil, err
	}
	cc := c.current()
	if cc == nil {
		return nil, imv2.Errorf(imv2.CodeChannelUnavailable, "dataplane: not connected")
	}
	return cc.request(ctx, p, nil)
}

// requestTypes are the Common Protocol requests xAgent sends
// (Common Protocol §8): all but connector.hello, which the Client sends itself.
var requestTypes = map[string]bool{
	protocol.TypeChannelOpen: true, protocol.TypeChannelClose: true,
	protocol.TypeDescriptorGet: true, protocol.TypeToolInvoke: true, protocol.TypePing: true,
	protocol.TypeAuthStart: true, protocol.TypeAuthStatus: true, protocol.TypeAuthCancel: true, protocol.TypeAuthLogout: true,
}

// mayRequest refuses a packet Request must not write (P7).
func (c *Client) mayRequest(p *imv2.Packet) error {
	if p == nil {
		return imv2.Errorf(imv2.CodeInvalidPacket, "dataplane: Request of a nil packet")
	}
	if requestTypes[p.Type] {
		return nil
	}
	if p.ConnectorChannelID != "" {
		if n := c.Negotiated(p.ConnectorChannelID); n.Allows(p.Type, imv2.ToConnector) {
			return nil // negotiated on this channel toward the Connector
		}
	}
	return imv2.Errorf(imv2.CodeUnsupportedPacket, "dataplane: %q is neither a Common Protocol request nor negotiated toward the Connector on channel %q; not sent (P7)", short(p.Type), short(p.ConnectorChannelID))
}

// Negotiated returns the negotiated catalog of channel id (or of the
// channel that replaced it): the profiles enabled on it and the packet
// types each may carry which way (P5), as profile §1 asks xAgent to load.
// Everything this side sends on the channel is checked against it: finals,
// deltas and activity by the Channel, Request here, and every packet by
// the channel's transport. A connection.descriptor.push with other
// profiles renegotiates it (W7, P5). Nil (which allows nothing) for a
// channel not held.
func (c *Client) Negotiated(id string) *imv2.Negotiated {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.channels[c.resolveLocked(id)]; e != nil {
		return e.neg
	}
	return nil
}

// Ping sends ping and waits for the pong with the same request_id (W8).
func (c *Client) Ping(ctx context.Context) error {
	p, err := imv2.NewPacket(protocol.TypePing, "", nil)
	if err != nil {
		return err
	}
	r, err := c.Request(ctx, p)
	if err == nil && r.Type != protocol.TypePong {
		err = imv2.Errorf(imv2.CodeInvalidPacket, "ping answered with %q", r.Type)
	}
	return err
}

// Card returns the Connector's Card as Dial fetched it.
func (c *Client) Card() *protocol.Card { return c.card }

// admitVersion checks the Connector's protocol_version of a hello.ack
// against the configured range (W4).
func (c *Client) admitVersion(s string) (protocol.Version, error) {
	lo, hi := c.cfg.Advanced.MinProtocolVersion, c.cfg.Advanced.MaxProtocolVersion
	if s == "" {
		return protocol.Version{}, imv2.Errorf(imv2.CodeInvalidPacket, "hello.ack has no protocol_version; this side admits Connectors speaking %s to %s (W4)", lo, hi)
	}
	v, err := protocol.ParseVersion(s)
	if err != nil {
		return protocol.Version{}, imv2.Errorf(imv2.CodeInvalidPacket, "hello.ack protocol_version %q is not major.minor; this side admits %s to %s (W4)", short(s), lo, hi)
	}
	if v.Compare(lo) < 0 || v.Compare(hi) > 0 {
		return protocol.Version{}, imv2.Errorf(imv2.CodeInvalidPacket, "the Connector speaks protocol_version %s; this side admits %s to %s (W4)", v, lo, hi)
	}
	return v, nil
}

// ProtocolVersion returns the Connector's protocol_version of the last
// hello.ack (W4): the version the connection speaks.
func (c *Client) ProtocolVersion() protocol.Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// ConnectorID returns the connector_id of the last hello.ack.
func (c *Client) ConnectorID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connectorID
}

// Connected reports whether a hello-completed connection is up. It turns
// true before the stored channels are reopened on it: WaitOpen waits for
// a channel itself.
func (c *Client) Connected() bool {
	return c.current() != nil
}

// Done is closed when the client stopped: Close, or reconnecting gave up
// (Err says why).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client stopped reconnecting, or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close stops reconnecting, closes the connection and every Channel
// (pending finals stay in their store) and waits for every goroutine.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if c.err == nil {
		c.err = imv2.ErrClosed
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	chans := make([]*clientChannel, 0, len(c.channels))
	for _, e := range c.channels {
		chans = append(chans, e)
	}
	c.mu.Unlock()
	for _, e := range chans {
		_ = e.ch.Close()
	}
	c.deliveries.closeAll()
	return nil
}

func (c *Client) current() *clientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// request writes p and waits for the packet answering its request_id.
// onReply, if set, runs on the read loop before the answer is returned.
func (cc *clientConn) request(ctx context.Context, p *imv2.Packet, onReply func(*imv2.Packet)) (*imv2.Packet, error) {
	if p.RequestID == "" {
		p.RequestID = "req_" + uuid.NewString()
	}
	w := &waiter{onReply: onReply, res: make(chan *imv2.Packet, 1)}
	cc.mu.Lock()
	if cc.isDead {
		cc.mu.Unlock()
		return nil, errConnLost()
	}
	cc.waiters[p.RequestID] = w
	cc.mu.Unlock()
	defer func() {
		cc.mu.Lock()
		delete(cc.waiters, p.RequestID)
		cc.mu.Unlock()
	}()
	if err := cc.conn.Write(ctx, p); err != nil {
		return nil, err
	}
	var r *imv2.Packet
	select {
	case r = <-w.res:
	case <-cc.dead:
		select {
		case r = <-w.res:
		default:
			return nil, errConnLost()
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e := r.Err(); e != nil {
		return r, e
	}
	return r, nil
}

func errConnLost() error {
	return imv2.Errorf(imv2.CodeClosed, "dataplane: connection lost before the answer")
}

// takeWaiter removes and returns the waiter of an answer, if any.
func (cc *clientConn) takeWaiter(p *imv2.Packet) *waiter {
	if p.RequestID == "" {
		return nil
	}
	if p.Type != imv2.TypeError && p.Type != protocol.TypePong && !strings.HasSuffix(p.Type, ".ack") {
		return nil
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	w := cc.waiters[p.RequestID]
	delete(cc.waiters, p.RequestID)
	return w
}

func (cc *clientConn) readLoop() {
	c := cc.c
	defer c.wg.Done()
	defer func() {
		cc.mu.Lock()
		cc.isDead = true
		cc.mu.Unlock()
		close(cc.dead)
	}()
	// On the connection's reader goroutine where the Conn allows
	// (readEach): no hand-off between socket and Channel.
	err := readEach(c.ctx, cc.conn, func(p *imv2.Packet, err error) {
		if err == nil {
			cc.dispatch(p)
			return
		}
		if p == nil || p.Type != imv2.TypeError {
			var req *imv2.Packet
			if p != nil && p.PacketID != "" {
				req = p
			}
			cc.send(imv2.NewErrorPacket(req, imv2.AsError(err, imv2.CodeInvalidPacket)))
		}
	})
	if c.ctx.Err() == nil {
		c.log.Debug("dataplane: read ended", "err", err)
	}
	_ = cc.conn.Close()
}

func (cc *clientConn) dispatch(p *imv2.Packet) {
	c := cc.c
	if w := cc.takeWaiter(p); w != nil {
		if w.onReply != nil {
			w.onReply(p)
		}
		w.res <- p
		return
	}
	switch p.Type {
	case protocol.TypePing:
		if r, err := imv2.NewResponse(p, protocol.TypePong, nil); err == nil {
			cc.send(r)
		}
		return
	case protocol.TypePong:
		return
	case imv2.TypeError:
		if e := cc.openHere(p.ConnectorChannelID); e != nil {
			_ = e.ch.Receive(c.ctx, p)
			return
		}
		c.log.Debug("dataplane: peer error", "code", p.Err(), "reply_to", p.ReplyTo)
		return
	case protocol.TypeDescriptorPush:
		cc.descriptorPush(p)
		return
	}
	if c.imTypes[p.Type] {
		if p.ConnectorChannelID == "" {
			cc.send(imv2.NewErrorPacket(p, imv2.Errorf(imv2.CodeChannelIDRequired, "%s needs connector_channel_id (I1)", p.Type)))
			return
		}
		e := cc.openHere(p.ConnectorChannelID)
		if e == nil {
			cc.send(imv2.NewErrorPacket(p, imv2.Errorf(imv2.CodeChannelNotOpen, "channel %q is not open on this connection (X2)", short(p.ConnectorChannelID))))
			return
		}
		if err := e.ch.Receive(c.ctx, p); err != nil {
			c.log.Debug("dataplane: channel receive", "connector_channel_id", e.id, "type", p.Type, "err", err)
		}
		return
	}
	if strings.HasSuffix(p.Type, ".ack") || strings.HasSuffix(p.Type, ".push") {
		// A late answer or a push this client does not use
		// (tool.progress.push, the legacy message.push).
		c.log.Debug("dataplane: unhandled packet", "type", p.Type)
		return
	}
	if p.ConnectorChannelID != "" {
		// Channel traffic of no negotiated profile (session sync, history,
		// UI projections …): dropped silently, no error, no ack (P6, X1).
		c.log.Debug("dataplane: dropped channel packet outside the negotiated profiles", "type", short(p.Type))
		return
	}
	cc.send(imv2.NewErrorPacket(p, imv2.Errorf(imv2.CodeUnsupportedPacket, "packet type %q is not served by this client", short(p.Type))))
}

// descriptorPush applies connection.descriptor.push (W7): a descriptor
// whose identity does not match the channel is ignored (Common Protocol §8.17),
// as is one enabling no profile this side shares (Common Protocol §9: profiles are
// non-empty and declared by the Card); changed profiles renegotiate the
// Channel (P5).
func (cc *clientConn) descriptorPush(p *imv2.Packet) {
	c := cc.c
	var dp protocol.DescriptorPayload
	e := cc.openHere(p.ConnectorChannelID)
	if e == nil || p.DecodePayload(&dp) != nil || dp.ConnectionDescriptor == nil {
		c.log.Debug("dataplane: descriptor push ignored", "connector_channel_id", short(p.ConnectorChannelID))
		return
	}
	d := dp.ConnectionDescriptor
	d.Normalize() // a legacy v1 Descriptor (Common Protocol §12)
	if d.Connection.ConnectorChannelID != e.id || d.Connection.ConnectorCardID != c.cfg.Advanced.CardID || d.Connection.ConnectorID != c.ConnectorID() {
		c.log.Info("dataplane: descriptor push with another identity ignored", "connector_channel_id", e.id)
		return
	}
	neg := c.negotiate(d.Connection.Profiles)
	if len(neg.Profiles()) == 0 {
		// Profiles must be non-empty and declared by the Card
		// (Common Protocol §9 hard validation): such a push is invalid, and
		// obeying it would silence the channel. Ignored, as a mismatch is.
		c.log.Info("dataplane: descriptor push enabling no profile this side shares ignored", "connector_channel_id", e.id)
		return
	}
	c.mu.Lock()
	changed := !neg.Equal(e.neg)
	if changed {
		e.neg = neg
	}
	c.mu.Unlock()
	if changed {
		e.ch.Renegotiate(neg)
	}
	if c.cfg.OnDescriptor != nil {
		c.cfg.OnDescriptor(e.id, d)
	}
}

func (cc *clientConn) openHere(id string) *clientChannel {
	if id == "" {
		return nil
	}
	c := cc.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.channels[id]; e != nil && e.conn == cc {
		return e
	}
	return nil
}

// transport is the Transport of a channel open on this connection; it
// refuses once the channel moved or closed, so nothing leaks onto a stale
// connection.
func (cc *clientConn) transport(e *clientChannel) imv2.Transport {
	return imv2.TransportFunc(func(ctx context.Context, p *imv2.Packet) error {
		cc.c.mu.Lock()
		ok, neg := e.conn == cc, e.neg
		cc.c.mu.Unlock()
		if !ok {
			return imv2.Errorf(imv2.CodeChannelNotOpen, "channel %q is not open on this connection", e.id)
		}
		if p.Type != imv2.TypeError && !neg.Allows(p.Type, imv2.ToConnector) {
			// The last guard of P7: nothing the negotiated catalog does
			// not carry toward the Connector leaves on this channel.
			return imv2.Errorf(imv2.CodeUnsupportedPacket, "%s is not negotiated toward the Connector on channel %q (P7)", short(p.Type), e.id)
		}
		return cc.conn.Write(ctx, p)
	})
}

func (cc *clientConn) send(p *imv2.Packet) {
	if err := cc.conn.Write(cc.c.ctx, p); err != nil && !errors.Is(err, context.Canceled) {
		cc.c.log.Log(cc.c.ctx, writeLevel(err), "dataplane: write", "type", p.Type, "err", err)
	}
}

// writeLevel is the log level of a failed packet write: a packet that
// does not encode (or is over the frame limit) is this side's bug, worth a
// warning; a connection going away is routine.
func writeLevel(err error) slog.Level {
	if errors.Is(err, imv2.ErrInvalidPacket) {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}
