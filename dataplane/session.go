package dataplane

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// session is one data-plane connection on the Connector side. Its read loop
// (the connection's reader goroutine, see readEach) is the only goroutine
// that dispatches packets; auth and tool handlers run
// in goroutines of their own, bounded by sem.
type session struct {
	srv    *Server
	conn   Conn
	ctx    context.Context // ends with the connection
	cancel context.CancelFunc
	log    *slog.Logger

	helloDone bool        // read loop only
	helloSeen atomic.Bool // for the hello timer
	supported []string    // hello's supported_profiles, read loop only
	// neg is the negotiated set of supported and the Card, read loop
	// only. Every channel of the connection shares it (it is immutable),
	// so 10,000 channels do not hold 10,000 copies.
	neg *imv2.Negotiated

	inst     *instance                // guarded by srv.mu
	preHello bool                     // guarded by srv.mu: holds a slot of MaxPreHello
	open     map[string]*channelEntry // guarded by srv.mu: channels open here

	sem   chan struct{}
	wg    sync.WaitGroup
	ended chan struct{} // closed once detached
}

func (s *Server) newSession(ctx context.Context, conn Conn, slot bool) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slot && !s.closed && s.preHello < s.cfg.MaxPreHello {
		s.preHello++
		slot = true
	}
	if s.closed || s.unavailable != "" || !slot { // unavailable: SetUnavailable raced the upgrade
		if slot {
			s.preHello--
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	ss := &session{
		srv:    s,
		conn:   conn,
		ctx:    ctx,
		cancel: cancel,
		log:    s.log,
		open:   map[string]*channelEntry{},
		sem:    make(chan struct{}, s.cfg.MaxHandlerCalls),
		ended:  make(chan struct{}),

		preHello: true,
	}
	s.sessions[ss] = struct{}{}
	s.wg.Add(1)
	return ss
}

// run reads and dispatches until the connection ends, then detaches.
func (ss *session) run() error {
	defer ss.srv.wg.Done()
	hello := ss.srv.clock.AfterFunc(ss.srv.cfg.HelloTimeout, func() {
		if !ss.helloSeen.Load() {
			ss.log.Info("dataplane: no connector.hello in time; closing")
			_ = ss.conn.Close()
		}
	})
	// Packets are dispatched on the connection's reader goroutine where
	// the Conn allows (readEach): no hand-off between socket and Channel.
	err := readEach(ss.ctx, ss.conn, func(p *imv2.Packet, err error) {
		if err != nil {
			ss.answerInvalid(p, err)
			return
		}
		ss.dispatch(p)
	})
	hello.Stop()
	ss.cancel()
	_ = ss.conn.Close()
	ss.wg.Wait()
	ss.srv.detach(ss)
	close(ss.ended)
	return err
}

// isInvalidFrame tells a bad frame (answer and go on, E2) from the end of
// the connection.
func isInvalidFrame(err error) bool {
	var e *imv2.Error
	return errors.As(err, &e) && e.Code == imv2.CodeInvalidPacket
}

// answerInvalid answers a frame that is not a valid packet with an error
// packet invalid_packet (E2). An invalid error packet is not answered, so
// two peers can never bounce errors forever.
func (ss *session) answerInvalid(p *imv2.Packet, err error) {
	if p != nil && p.Type == imv2.TypeError {
		return
	}
	var req *imv2.Packet
	if p != nil && p.PacketID != "" {
		req = p
	}
	ss.send(imv2.NewErrorPacket(req, imv2.AsError(err, imv2.CodeInvalidPacket)))
}

func (ss *session) dispatch(p *imv2.Packet) {
	switch p.Type {
	case protocol.TypePing: // allowed before hello: a liveness probe is no user-level packet
		ss.reply(p, protocol.TypePong, nil)
		return
	case protocol.TypePong:
		return
	case imv2.TypeError:
		ss.peerError(p)
		return
	case protocol.TypeConnectorHello:
		ss.hello(p)
		return
	}
	if !ss.helloDone {
		ss.fail(p, protocol.CodeHelloRequired, "connector.hello must complete before %s (W3)", p.Type)
		return
	}
	switch p.Type {
	case protocol.TypeChannelOpen:
		ss.openChannel(p)
	case protocol.TypeChannelClose:
		ss.closeChannel(p)
	case protocol.TypeDescriptorGet:
		ss.descriptorGet(p)
	case protocol.TypeAuthStart, protocol.TypeAuthStatus, protocol.TypeAuthCancel, protocol.TypeAuthLogout:
		ss.auth(p)
	case protocol.TypeToolInvoke:
		ss.tool(p)
	default:
		if ss.srv.imTypes[p.Type] {
			ss.route(p)
			return
		}
		if p.ConnectorChannelID != "" {
			// Channel traffic of no negotiated profile (session sync,
			// history, UI projections …): dropped silently (P6, X1).
			ss.log.Debug("dataplane: dropped channel packet outside the negotiated profiles", "type", short(p.Type))
			return
		}
		ss.fail(p, imv2.CodeUnsupportedPacket, "packet type %q is not served by this Connector", short(p.Type))
	}
}

// peerError hands an error packet for an open channel to its Channel (it
// counts it) and otherwise only logs it. Errors are never answered.
func (ss *session) peerError(p *imv2.Packet) {
	if ss.helloDone && p.ConnectorChannelID != "" {
		if e := ss.openHere(p.ConnectorChannelID); e != nil {
			_ = e.ch.Receive(ss.ctx, p)
			return
		}
	}
	code := imv2.Code("")
	if p.Error != nil {
		code = p.Error.Code
	}
	ss.log.Debug("dataplane: peer error", "code", code, "reply_to", p.ReplyTo)
}

// hello validates connector.hello (W4, P3) and answers hello.ack with the
// connector_id, new or reused.
func (ss *session) hello(p *imv2.Packet) {
	if ss.helloDone {
		ss.fail(p, imv2.CodeInvalidPacket, "connector.hello already completed on this connection")
		return
	}
	var h protocol.ConnectorHello
	if err := p.DecodePayload(&h); err != nil {
		ss.failErr(p, err)
		return
	}
	card := ss.srv.cfg.Card.ConnectorCardID
	switch {
	case h.ConnectorCardID != card:
		ss.fail(p, protocol.CodeConnectorCardIDMismatch, "connector.hello names connector_card_id %q; this Connector is %q (W4)", short(h.ConnectorCardID), card)
		return
	case h.ProtocolVersion == "":
		ss.fail(p, imv2.CodeInvalidPacket, "connector.hello: protocol_version is missing; this Connector speaks %s and admits xAgent %s or newer (W4)", protocol.ProtocolVersion, protocol.ProtocolVersion)
		return
	}
	// xAgent's hello carries its own current version; a newer one is
	// admitted (it keeps a compatible range, Common Protocol §12) and the
	// ack answers with this Connector's version.
	peer, err := protocol.ParseVersion(h.ProtocolVersion)
	switch {
	case err != nil:
		ss.fail(p, imv2.CodeInvalidPacket, "connector.hello: protocol_version %q is not major.minor[.patch]; this Connector speaks %s (W4)", short(h.ProtocolVersion), protocol.ProtocolVersion)
		return
	case peer.Compare(protocol.Version30) < 0:
		ss.fail(p, imv2.CodeInvalidPacket, "connector.hello: protocol_version %s is below %s, the version this Connector speaks (W4)", peer, protocol.ProtocolVersion)
		return
	case h.SupportedProfiles == nil:
		ss.fail(p, imv2.CodeInvalidPacket, "connector.hello: supported_profiles is missing; no profile is enabled implicitly (P3)")
		return
	case len(h.SupportedProfiles) > MaxHelloProfiles:
		ss.fail(p, imv2.CodeInvalidPacket, "connector.hello: %d supported_profiles, over the limit of %d", len(h.SupportedProfiles), MaxHelloProfiles)
		return
	}
	for _, id := range h.SupportedProfiles {
		if len(id) > MaxProfileIDBytes {
			ss.fail(p, imv2.CodeInvalidPacket, "connector.hello: a supported_profiles entry of %d bytes, over the limit of %d", len(id), MaxProfileIDBytes)
			return
		}
	}
	ss.srv.awaitHolder(ss.ctx, h.ConnectorID)
	// A connector_id the shared registry cannot be asked about is refused
	// for now, not replaced: a new one would strand the channels it holds
	// on every replica (storeUnavailable).
	adopt, err := ss.knownElsewhere(h.ConnectorID)
	if err != nil {
		ss.refuse(p, err)
		return
	}
	ss.srv.makeRoom(ss.ctx, h.ConnectorID)
	inst, err := ss.srv.attach(ss, h.ConnectorID, adopt)
	if err != nil {
		ss.failErr(p, err)
		return
	}
	ss.recordSeen(inst.id)
	if h.ConnectorID != "" && h.ConnectorID != inst.id {
		// Debug: every restart of a Connector without a shared registry
		// forgets the connector_ids it issued, so this is the normal first
		// hello after one (xAgent reopens its channels under the new ID);
		// a connector_id dropped past its offline grace was logged then.
		ss.log.Debug("dataplane: connector_id not known here (issued before a restart or dropped past its grace); issued a new one", "old_connector_id", short(h.ConnectorID), "connector_id", inst.id)
	}
	if peer != protocol.Version30 {
		ss.log.Info("dataplane: xAgent speaks a newer protocol version; answering with this Connector's", "xagent", peer.String(), "connector", protocol.ProtocolVersion)
	}
	ss.supported = slices.Clone(h.SupportedProfiles)
	ss.neg = imv2.DefaultCatalog().Negotiate(ss.supported, ss.srv.cfg.Card.Supports.Profiles)
	ss.helloDone = true
	ss.helloSeen.Store(true)
	if wc, ok := ss.conn.(*wsConn); ok {
		wc.raiseReadLimit() // on its reader goroutine: this handler runs there
	}
	ss.reply(p, protocol.TypeConnectorHelloAck, protocol.ConnectorHelloAck{
		ConnectorCardID: card,
		ConnectorID:     inst.id,
		ProtocolVersion: protocol.ProtocolVersion,
	})
}

// openChannel serves channel.open (W5): an empty ID creates a channel, a
// known one (of this connector_id) is reused and reattached, an unknown
// one gets a new ID. The ack goes out before the Channel gets its
// transport, so the pending messages it resends follow the ack (S10).
func (ss *session) openChannel(p *imv2.Packet) {
	neg := ss.neg
	if len(neg.Profiles()) == 0 {
		ss.fail(p, imv2.CodeChannelUnavailable, "no profile in common: the hello offered %q, the Card supports %q (P3)", ss.supported, ss.srv.cfg.Card.Supports.Profiles)
		return
	}
	e, renegotiate := ss.channelOf(p.ConnectorChannelID, neg)
	var err error
	if e != nil {
		err = ss.reopenHook(e.id)
	} else {
		e, err = ss.openNew(p.ConnectorChannelID, neg)
	}
	if err == nil {
		err = ss.hold(e)
	}
	if err != nil {
		ss.refuse(p, err)
		return
	}
	if renegotiate {
		e.ch.Renegotiate(neg) // P5
	}
	ss.ackOpen(p, e)
}

// channelOf returns this connector_id's channel id, if it has one, with
// neg as its negotiated set from now on; renegotiate reports a change.
func (ss *session) channelOf(id string, neg *imv2.Negotiated) (e *channelEntry, renegotiate bool) {
	if id == "" {
		return nil, false
	}
	srv := ss.srv
	srv.mu.Lock()
	defer srv.mu.Unlock()
	e = ss.inst.channels[id]
	if e != nil && !neg.Equal(e.neg) {
		e.neg = neg
		renegotiate = true
	}
	return e, renegotiate
}

// reopenHook runs OnChannelReopen, if set, for a channel of this
// connector_id opened again.
func (ss *session) reopenHook(id string) error {
	if hook := ss.srv.cfg.OnChannelReopen; hook != nil {
		return hook(ss.ctx, id)
	}
	return nil
}

// openNew makes the channel a channel.open of id gets when this
// connector_id has none by that ID: id itself when the Registry knows it
// (issued before a restart), else a new ID. It runs OnChannelCreate or
// OnChannelReopen; a new channel the hook refuses is dropped at once, so
// failed opens hold no MaxChannels slot and evict no real channel.
func (ss *session) openNew(id string, neg *imv2.Negotiated) (*channelEntry, error) {
	srv := ss.srv
	e, reused, elsewhere, err := ss.makeChannel(id, neg)
	if err != nil {
		return nil, err
	}
	if id != "" && !reused {
		ss.log.Info("dataplane: channel.open for an unknown channel; issued a new ID", "old_connector_channel_id", short(id), "connector_channel_id", e.id)
		if !elsewhere {
			srv.handoverCompleted(ss.ctx, id, e.id)
		}
	}
	if reused {
		return e, ss.reopenHook(e.id)
	}
	if srv.cfg.OnChannelCreate != nil {
		if err := srv.cfg.OnChannelCreate(ss.ctx, e.id); err != nil {
			srv.mu.Lock()
			if srv.channels[e.id] == e {
				srv.dropChannelLocked(e)
			}
			srv.mu.Unlock()
			return nil, err
		}
	}
	return e, nil
}

// makeChannel makes the channel for a channel.open of id (reused: id
// itself), asking the Registry again (up to three times) when a drop
// began meanwhile (errStaleKnown). elsewhere reports that another
// connector_id holds id.
func (ss *session) makeChannel(id string, neg *imv2.Negotiated) (e *channelEntry, reused, elsewhere bool, err error) {
	for try := 1; ; try++ {
		var (
			reuse string
			drops uint64
		)
		reuse, elsewhere, drops, err = ss.reusable(id)
		if err != nil {
			return nil, false, elsewhere, err
		}
		e, err = ss.newChannel(ss.inst, neg, reuse, drops)
		if !errors.Is(err, errStaleKnown) || try == 3 {
			return e, reuse != "", elsewhere, err
		}
	}
}

// reusable reports whether this connector_id has room for one more
// channel, and returns id as reuse when a channel.open may reuse it: no
// connector_id holds it, none is dropping it and the Registry knows it.
// drops is Server.drops before the Registry was asked (newChannel).
// The room is checked before any store call or NewTarget: a peer retrying
// at the cap costs no Known, Register or Forget of a durable Registry
// (and runs no user code) per refused open.
func (ss *session) reusable(id string) (reuse string, elsewhere bool, drops uint64, err error) {
	srv := ss.srv
	srv.mu.Lock()
	_, err = srv.roomLocked(ss.inst)
	_, elsewhere = srv.channels[id]
	_, dropping := srv.dropping[id]
	drops = srv.drops
	srv.mu.Unlock()
	if err != nil || id == "" || elsewhere || dropping {
		return "", elsewhere, drops, err
	}
	// An ID the Registry cannot be asked about is refused for now, not
	// replaced: a new ID would move the channel away from its pending and
	// completed state for good.
	ctx, cancel := ss.storeCall()
	known, err := srv.cfg.Registry.Known(ctx, id)
	cancel()
	if err != nil {
		return "", elsewhere, drops, storeUnavailable("channel.open", err)
	}
	if known {
		reuse = id
	}
	return reuse, elsewhere, drops, nil
}

// hold makes this connection the channel's owner, taking it over from an
// older connection, unless the channel was dropped meanwhile (server
// closing, instance expired).
func (ss *session) hold(e *channelEntry) error {
	srv := ss.srv
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.channels[e.id] != e {
		return imv2.Errorf(imv2.CodeChannelUnavailable, "channel %q was dropped", e.id)
	}
	if e.owner != nil && e.owner != ss {
		delete(e.owner.open, e.id)
	}
	e.owner = ss
	e.lastUsed = srv.clock.Now()
	ss.open[e.id] = e
	return nil
}

// ackOpen answers channel.open with the channel's Descriptor, then hands
// the Channel this connection as its transport.
func (ss *session) ackOpen(p *imv2.Packet, e *channelEntry) {
	srv := ss.srv
	ack, err := imv2.NewResponse(p, protocol.TypeChannelOpenAck, protocol.ChannelOpenAck{
		ConnectorChannelID:   e.id,
		ConnectionDescriptor: srv.describe(ss.ctx, e),
	})
	if err != nil {
		ss.failErr(p, err)
		return
	}
	ack.ConnectorChannelID = e.id
	if srv.cfg.OnChannelOpen != nil {
		srv.cfg.OnChannelOpen(e.id)
	}
	ss.send(ack)
	e.syncTransport(srv)
}

// roomLocked reports whether inst may have one more channel: not when the
// Server closes or inst is gone, nor at MaxChannels with every channel
// open; at MaxChannels it returns the closed channel to drop to make
// room, the least recently used. srv.mu is held.
func (srv *Server) roomLocked(inst *instance) (victim *channelEntry, _ error) {
	if srv.closed || srv.instances[inst.id] != inst {
		return nil, imv2.Errorf(imv2.CodeChannelUnavailable, "connector_id %q is gone", inst.id)
	}
	if len(inst.channels) < srv.cfg.MaxChannels {
		return nil, nil
	}
	for _, c := range inst.channels {
		if c.owner == nil && (victim == nil || c.lastUsed.Before(victim.lastUsed)) {
			victim = c
		}
	}
	if victim == nil {
		return nil, imv2.Errorf(imv2.CodeChannelUnavailable, "connector_id %q has %d open channels, the limit", inst.id, srv.cfg.MaxChannels)
	}
	return victim, nil
}

// errStaleKnown: a drop began while a reopen asked the Registry, so its
// answer may predate that drop's Forget; the reopen asks again. It is
// the cause of a connector_channel_unavailable error (staleKnown), so
// errors.Is tells it from the other refusals with that code.
var errStaleKnown = errors.New("channels were dropped while this channel.open ran; try again")

func staleKnown() error { return imv2.Errorf(imv2.CodeChannelUnavailable, "%w", errStaleKnown) }

// newChannel creates a channel of inst, evicting the least recently used
// closed channel when the instance is at MaxChannels. id is a registered
// ID to reuse, or "" for a new one; drops is Server.drops when the
// Registry said id was registered (errStaleKnown if a drop began since).
// It returns the entry to open, possibly another connection's for id.
func (ss *session) newChannel(inst *instance, neg *imv2.Negotiated, id string, drops uint64) (_ *channelEntry, err error) {
	srv := ss.srv
	reuse := id != ""
	if id == "" {
		id = "cch_" + uuid.NewString()
		ctx, cancel := ss.storeCall()
		err := srv.cfg.Registry.Register(ctx, id)
		cancel()
		if err != nil {
			if !errors.Is(err, &imv2.Error{Code: imv2.CodeChannelUnavailable}) {
				srv.forgetAmbiguous(id)
			}
			return nil, storeUnavailable("channel.open", err)
		}
		defer func() {
			if err != nil { // an ID issued for a channel that was never made
				srv.forget(id)
			}
		}()
	}
	target := srv.cfg.NewTarget(id)
	if target == nil {
		return nil, imv2.Errorf(imv2.CodeChannelUnavailable, "no target for channel %q", id)
	}
	opts := srv.opts
	opts.Budget = inst.budget  // its channels share the connector_id's budget
	opts.ConnectorID = inst.id // and a share of a completed store (imv2.Options.ConnectorID)
	ch, err := imv2.NewChannel(id, imv2.RoleConnector, neg, nil, target, &opts)
	if err != nil {
		return nil, err
	}
	srv.mu.Lock()
	e, err := srv.placeLocked(inst, id, ch, neg, reuse, drops)
	srv.mu.Unlock()
	if e == nil || e.ch != ch {
		// Refused or lost to another connection's Channel: this one was
		// never used, and closes at once (outside srv.mu: Close waits).
		_ = ch.Close()
	}
	return e, err
}

// placeLocked enters ch as channel id of inst, evicting to make room; it
// returns the entry already there when another connection reopened the
// same registered ID meanwhile (one Channel per ID). srv.mu is held.
func (srv *Server) placeLocked(inst *instance, id string, ch *imv2.Channel, neg *imv2.Negotiated, reuse bool, drops uint64) (*channelEntry, error) {
	victim, err := srv.roomLocked(inst)
	if err == nil && reuse && srv.drops != drops && srv.channels[id] == nil {
		err = staleKnown()
	}
	if err != nil {
		return nil, err
	}
	if victim != nil {
		srv.log.Warn("dataplane: channel limit reached; dropping the least recently used closed channel", "connector_channel_id", victim.id)
		srv.dropChannelLocked(victim)
	}
	if old := srv.channels[id]; old != nil {
		if old.inst != inst {
			return nil, imv2.Errorf(imv2.CodeChannelUnavailable, "channel %q is open for another connector_id", id)
		}
		return old, nil
	}
	e := &channelEntry{id: id, inst: inst, ch: ch, neg: neg, lastUsed: srv.clock.Now()}
	inst.channels[id] = e
	srv.channels[id] = e
	return e, nil
}

// closeChannel serves channel.close (W6): routing stops before the ack;
// the Channel and its pending and completed state stay for a reopen, and
// auth state (the author's) is untouched.
func (ss *session) closeChannel(p *imv2.Packet) {
	e := ss.openEntry(p)
	if e == nil {
		return
	}
	srv := ss.srv
	srv.mu.Lock()
	if e.owner == ss {
		e.owner = nil
	}
	delete(ss.open, e.id)
	e.lastUsed = srv.clock.Now()
	srv.mu.Unlock()
	e.syncTransport(srv)
	ss.reply(p, protocol.TypeChannelCloseAck, protocol.StatusOK{Status: "ok"})
	if srv.cfg.OnChannelClose != nil && !srv.IsOpen(e.id) {
		srv.cfg.OnChannelClose(e.id)
	}
}

// descriptorGet serves connection.descriptor.get (W7).
func (ss *session) descriptorGet(p *imv2.Packet) {
	e := ss.openEntry(p)
	if e == nil {
		return
	}
	ss.reply(p, protocol.TypeDescriptorGetAck, protocol.DescriptorPayload{ConnectionDescriptor: ss.srv.describe(ss.ctx, e)})
}

// route hands an IM v2 packet to its channel's Channel, found by the
// envelope's connector_channel_id only (I1, X2).
func (ss *session) route(p *imv2.Packet) {
	e := ss.openEntry(p)
	if e == nil {
		return
	}
	if err := e.ch.Receive(ss.ctx, p); err != nil {
		ss.log.Debug("dataplane: channel receive", "connector_channel_id", e.id, "type", p.Type, "err", err)
	}
}

// openEntry returns the channel a channel-scoped packet names if it is
// open on this connection, and otherwise answers
// connector_channel_id_required or channel_not_open.
func (ss *session) openEntry(p *imv2.Packet) *channelEntry {
	if p.ConnectorChannelID == "" {
		ss.fail(p, imv2.CodeChannelIDRequired, "%s needs connector_channel_id (I1)", p.Type)
		return nil
	}
	if e := ss.openHere(p.ConnectorChannelID); e != nil {
		return e
	}
	ss.fail(p, imv2.CodeChannelNotOpen, "channel %q is not open on this connection; channel.open must complete before %s (X2)", short(p.ConnectorChannelID), p.Type)
	return nil
}

func (ss *session) openHere(id string) *channelEntry {
	ss.srv.mu.Lock()
	defer ss.srv.mu.Unlock()
	if e := ss.open[id]; e != nil && e.owner == ss {
		return e
	}
	return nil
}

// transport is the Transport a Channel uses while open on this session.
// It refuses once the channel is no longer open here, so nothing of a
// closed channel reaches the wire (W6, Connector Architecture §10).
func (ss *session) transport(e *channelEntry) imv2.Transport {
	return imv2.TransportFunc(func(ctx context.Context, p *imv2.Packet) error {
		ss.srv.mu.Lock()
		ok := e.owner == ss
		ss.srv.mu.Unlock()
		if !ok {
			return imv2.Errorf(imv2.CodeChannelNotOpen, "channel %q is not open on this connection", e.id)
		}
		return ss.conn.Write(ctx, p)
	})
}

// spawn runs f for a handler call, waiting for a slot first (backpressure
// on the read loop rather than unbounded goroutines).
func (ss *session) spawn(f func(ctx context.Context)) {
	select {
	case ss.sem <- struct{}{}:
	case <-ss.ctx.Done():
		return
	}
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		defer func() { <-ss.sem }()
		f(ss.ctx)
	}()
}

func (ss *session) send(p *imv2.Packet) {
	if err := ss.conn.Write(ss.ctx, p); err != nil {
		ss.log.Log(ss.ctx, writeLevel(err), "dataplane: write", "type", p.Type, "err", err)
	}
}

// reply answers req with an ack echoing request_id and setting reply_to (W9).
func (ss *session) reply(req *imv2.Packet, typ string, payload any) {
	p, err := imv2.NewResponse(req, typ, payload)
	if err != nil {
		ss.failErr(req, err)
		return
	}
	ss.send(p)
}

// fail answers req with an error packet (E3, W10).
func (ss *session) fail(req *imv2.Packet, code imv2.Code, format string, args ...any) {
	ss.send(imv2.NewErrorPacket(req, imv2.Errorf(code, format, args...)))
}

func (ss *session) failErr(req *imv2.Packet, err error) {
	ss.send(imv2.NewErrorPacket(req, imv2.AsError(err, imv2.CodeInvalidPacket)))
}

// short bounds remote strings echoed in error messages.
func short(s string) string {
	const n = 128
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
