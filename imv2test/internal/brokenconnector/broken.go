// Package brokenconnector is a small IM v2 Connector written without the
// SDK's Channel: a raw WebSocket data plane (gorilla/websocket) behind the
// connector package's HTTP kit. With no flaw it passes the conformance
// suite; each Flaw breaks one rule the way real Connectors get it wrong,
// so the suite's own tests can prove that every check can fail, and that
// a flaw fails only the checks about it.
//
// Its "IM platform" is Config.Sink, which receives the target side
// effects as imv2test Events (the observer).
package brokenconnector

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/protocol"
)

// Flaw is one deliberate defect; the comment names the checks it fails.
type Flaw string

// The flaws.
const (
	ToolProfileUndeclared Flaw = "tool-profile-undeclared" // K1.a: a Card tool names a profile the Card does not declare (P8)
	HealthMismatch        Flaw = "health-mismatch"         // K1.b: /health reports another card version (H4)
	UploadsWithoutKey     Flaw = "uploads-without-key"     // K1.c: /files/uploads takes no API key (T1)
	DescriptorExtra       Flaw = "descriptor-extra"        // K1.d: the Descriptor lists a profile the Card lacks (P2)
	LenientHello          Flaw = "lenient-hello"           // K1.e, K1.f: any hello is welcome (W4, P3)
	ExactVersion          Flaw = "exact-version"           // K1.f: only a hello at exactly 3.0 is admitted, not today's xAgent at 4.3 (W4)
	FinalTwice            Flaw = "final-twice"             // K2.a, K2.d, K9.b, K11.a: posts the stitched deltas and then the final (M11)
	Placeholder           Flaw = "placeholder"             // K2.b, K5.a: posts a "…" placeholder before every final
	StitchGaps            Flaw = "stitch-gaps"             // K2.c, K6.c: appends deltas across gaps and conflicts (D4)
	NoDrafts              Flaw = "no-drafts"               // K2.d: a streaming target that shows no deltas (D8)
	NoDedup               Flaw = "no-dedup"                // K3 (K3.d too), K11.a: posts every resend again (M9, A6)
	AckReplyToMessageID   Flaw = "ack-reply-to-message-id" // K4.a: the ack's reply_to is the message_id (A1, I4)
	AcceptUnknownFields   Flaw = "accept-unknown-fields"   // K4.b, K7.a, K7.d: chat.message members are never checked, forbidden ones included (I2, M8)
	RejectUnknownMembers  Flaw = "reject-unknown-members"  // K7.d, K7.e: a chat.message member it does not know is a rejection (E5)
	NoRequestID           Flaw = "no-request-id"           // K4.c: pong and chat acks drop request_id (W8, W9)
	SilentInvalid         Flaw = "silent-invalid"          // K4.d: frames that are not packets get no error (E2)
	BufferTempText        Flaw = "buffer-temp-text"        // K5.a: a target that cannot stream still gets the deltas (K5)
	UnboundedDeltas       Flaw = "unbounded-deltas"        // K6: delta state has no cap and never expires (D9)
	LeakSessionID         Flaw = "leak-session-id"         // K7.b, K7.c, K8.a: acks and user messages carry session_id / user_id (I2)
	UnsignedDownload      Flaw = "unsigned-download"       // K8.a: download_url is the bare /files/refs path (T3)
	AcceptUnknownFile     Flaw = "accept-unknown-file"     // K8.b: a final naming any file_ref is accepted (M7, M12)
	DropFiles             Flaw = "drop-files"              // K8.c, K9.b: the final is shown without its files (M12)
	LenientDelta          Flaw = "lenient-delta"           // K9.a, K7.a: delta members it does not know are ignored (D7)
	AckBeforePost         Flaw = "ack-before-post"         // K2.e, K9.b: acks accepted, posts a second later (M12)
	AcceptSync            Flaw = "accept-sync"             // K10: shows and acks session sync / history packets (P6, P7)
	NewIDOnReconnect      Flaw = "new-id-on-reconnect"     // K11: a reconnect forgets the channel (W5, S10)
	ResendHistory         Flaw = "resend-history"          // K11.b: a reconnect resends every user message ever sent (S10)
	ActivityUnsupported   Flaw = "activity-unsupported"    // K12.a, K12.b, K12.d, K12.e: chat.activity is refused (C1, C5)
	IgnoreBadActivity     Flaw = "ignore-bad-activity"     // K12.c: invalid activity is dropped silently (X3)
	ActivityForever       Flaw = "activity-forever"        // K12.d: a shown status never times out (C7)
	StrictAckText         Flaw = "strict-ack-text"         // K4.e: an ack whose message is over 1,024 bytes or code over 256 is invalid_packet, the rejection ignored (A3)
	DeepFileNames         Flaw = "deep-file-names"         // K7.e: file-content names are refused at any depth, inside members it does not know too (M8, E5)
	PlainToolName         Flaw = "plain-tool-name"         // K12.e: a tool_name with a space or a slash is refused (C3)
	FingerprintURL        Flaw = "fingerprint-url"         // K3.d: a resend with a new download_url or expires_at is a conflict (S6)
	DraftOvertakes        Flaw = "draft-overtakes"         // K2.e: a final-only message waits out a rate limit in the background while the next message's drafts show at once (M14)
	FirstDraftOvertakes   Flaw = "first-draft-overtakes"   // K2.e: a message's first draft waits out a rate limit in the background while the next message's first draft shows at once (M14, D8)
	FinalsInArrivalOrder  Flaw = "finals-in-arrival-order" // K2.f: buffered, a reply's final is posted at once though a reply that started before it has not ended (M14)
	EditOtherReply        Flaw = "edit-other-reply"        // K2.f: post-then-edit with one temporary message per channel, so a second reply's deltas edit the first reply's message (D8)
	RejectRetryable       Flaw = "reject-retryable"        // every check whose final must be accepted: every valid final is rejected retryable, however often it is resent (A8, M12)
)

// Flaws lists every flaw.
var Flaws = []Flaw{
	ToolProfileUndeclared, HealthMismatch, UploadsWithoutKey, DescriptorExtra, LenientHello, ExactVersion,
	FinalTwice, Placeholder, StitchGaps, NoDrafts, NoDedup, AckReplyToMessageID, AcceptUnknownFields, RejectUnknownMembers,
	NoRequestID, SilentInvalid, BufferTempText, UnboundedDeltas, LeakSessionID, UnsignedDownload,
	AcceptUnknownFile, DropFiles, LenientDelta, AckBeforePost, AcceptSync, NewIDOnReconnect,
	ResendHistory, ActivityUnsupported, IgnoreBadActivity, ActivityForever, StrictAckText, DeepFileNames,
	PlainToolName, FingerprintURL, DraftOvertakes, FirstDraftOvertakes, RejectRetryable, FinalsInArrivalOrder,
	EditOtherReply,
}

// CardID is the fixture's connector_card_id.
const CardID = "im.broken"

// Defaults of Config.
const (
	DefaultPostDelay     = time.Second
	DefaultDeltaIdleTTL  = 5 * time.Minute
	DefaultMaxOpenDeltas = 32
	DefaultMaxDeltaBytes = 300 << 10
	DefaultActivityTTL   = 30 * time.Second
)

// Config configures a Connector.
type Config struct {
	Flaws []Flaw
	// APIKey guards /health, /ws and /files/uploads when set.
	APIKey string
	// Buffered makes the platform unable to stream: deltas are kept until
	// the final and never shown.
	Buffered bool
	// Sink receives the target side effects; nil drops them.
	Sink func(imv2test.Event)
	// PostDelay is how late the post follows the ack with AckBeforePost,
	// and the rate-limit wait of a final-only message with DraftOvertakes
	// or of a first draft with FirstDraftOvertakes.
	PostDelay time.Duration
	// Bounds of delta state (each stream expires after DeltaIdleTTL idle).
	DeltaIdleTTL  time.Duration
	MaxOpenDeltas int
	MaxDeltaBytes int
	// ActivityTimeout clears a shown status nobody refreshed (C7).
	ActivityTimeout time.Duration
}

// Connector is the fixture. Serve Handler(); Close it at the end.
type Connector struct {
	cfg      Config
	flaws    map[Flaw]bool
	card     *protocol.Card
	files    *connector.Handler
	handler  http.Handler
	upgrader websocket.Upgrader

	mu         sync.Mutex
	closed     bool
	connectors map[string]bool
	channels   map[string]*channel
	sessions   map[*session]bool
	wg         sync.WaitGroup
}

type channel struct {
	id        string
	owner     *session
	closedOn  *session // the connection that sent channel.close
	streams   map[string]*stream
	completed map[string]imv2.Fingerprint
	pending   []*userMsg
	acked     []*userMsg
	typing    bool
	typeTimer *time.Timer // the activity timeout of a shown status
	// Buffered, replies are posted in the order they started: places
	// counts them (a stream's first delta, or a final without one), held
	// are finals waiting for a reply that started before them.
	places uint64
	held   []heldFinal
	// temp, with EditOtherReply, is the message whose temporary message
	// the channel shows: every delta edits it until that message's final.
	temp string
}

// heldFinal is a buffered final waiting for the replies before it.
type heldFinal struct {
	place uint64
	post  func()
	timer *time.Timer // ends the wait after holdFinalsFor
}

// holdFinalsFor is the longest a buffered final waits for a reply that
// started before it and has not ended (one abandoned).
const holdFinalsFor = time.Second

type stream struct {
	text    strings.Builder
	ends    []int
	touched time.Time
	place   uint64 // the order it started in (channel.places)
}

type userMsg struct {
	msg     imv2.ChatMessage
	packets []string
}

// New builds a Connector.
func New(cfg Config) (*Connector, error) {
	if cfg.PostDelay <= 0 {
		cfg.PostDelay = DefaultPostDelay
	}
	if cfg.DeltaIdleTTL <= 0 {
		cfg.DeltaIdleTTL = DefaultDeltaIdleTTL
	}
	if cfg.MaxOpenDeltas <= 0 {
		cfg.MaxOpenDeltas = DefaultMaxOpenDeltas
	}
	if cfg.MaxDeltaBytes <= 0 {
		cfg.MaxDeltaBytes = DefaultMaxDeltaBytes
	}
	if cfg.ActivityTimeout <= 0 {
		cfg.ActivityTimeout = DefaultActivityTTL
	}
	if cfg.Sink == nil {
		cfg.Sink = func(imv2test.Event) {}
	}
	c := &Connector{
		cfg:        cfg,
		flaws:      map[Flaw]bool{},
		connectors: map[string]bool{},
		channels:   map[string]*channel{},
		sessions:   map[*session]bool{},
	}
	for _, f := range cfg.Flaws {
		if !slices.Contains(Flaws, f) {
			return nil, fmt.Errorf("brokenconnector: unknown flaw %q", f)
		}
		c.flaws[f] = true
	}
	c.card = c.buildCard()
	valid := *c.card
	valid.Tools = nil // the HTTP kit refuses an invalid Card; the flawed one is served by serveHTTP
	files, err := connector.NewHandler(connector.HandlerConfig{Card: &valid, APIKey: cfg.APIKey, WS: http.HandlerFunc(c.serveWS)})
	if err != nil {
		return nil, err
	}
	c.files = files
	c.handler = http.HandlerFunc(c.serveHTTP)
	c.upgrader = websocket.Upgrader{Subprotocols: []string{protocol.Subprotocol}}
	return c, nil
}

func (c *Connector) has(f Flaw) bool { return c.flaws[f] }

func (c *Connector) buildCard() *protocol.Card {
	card := &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "0.0.1", BuildTime: "2026-11-30T00:00:00Z"},
		ConnectorCardID: CardID,
		Connector:       protocol.CardInfo{Name: "Broken Connector", Version: "0.0.1"},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "broken", Label: "Broken"}},
			Profiles:    []string{imv2.ProfileIMv2},
		},
	}
	if c.has(ToolProfileUndeclared) {
		schema, _ := protocol.ToolInputSchema(map[string]json.RawMessage{"text": json.RawMessage(`{"type":"string"}`)}, "text")
		card.Tools = []protocol.Tool{{ToolID: "broken_send", Profile: "xagent.im.v1", InputSchema: schema}}
	}
	return card
}

// Handler serves the Card, health, skill, files and /ws.
func (c *Connector) Handler() http.Handler { return c.handler }

func (c *Connector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case c.has(ToolProfileUndeclared) && r.URL.Path == "/connector-card.json":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c.card)
		return
	case c.has(HealthMismatch) && r.URL.Path == "/health":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","connector_card_id":%q,"connector_card_version":"9.9.9","protocol_version":"3.0","build":{"version":"0.0.1","build_time":"2026-11-30T00:00:00Z"}}`, CardID)
		return
	case c.has(UploadsWithoutKey) && r.URL.Path == "/files/uploads" && c.cfg.APIKey != "":
		r.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	c.files.ServeHTTP(w, r)
}

// Close ends every connection and waits for delayed posts.
func (c *Connector) Close() error {
	c.mu.Lock()
	c.closed = true
	var ss []*session
	for s := range c.sessions {
		ss = append(ss, s)
	}
	for _, ch := range c.channels {
		if ch.typeTimer != nil {
			ch.typeTimer.Stop()
		}
	}
	c.mu.Unlock()
	for _, s := range ss {
		_ = s.ws.Close()
	}
	c.wg.Wait()
	return nil
}

func (c *Connector) serveWS(w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(websocket.Subprotocols(r), protocol.Subprotocol) {
		http.Error(w, "subprotocol "+protocol.Subprotocol+" required", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	ws, err := c.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	s := &session{c: c, ws: ws}
	c.mu.Lock()
	c.sessions[s] = true
	c.mu.Unlock()
	s.run()
	c.mu.Lock()
	delete(c.sessions, s)
	for _, ch := range c.channels {
		if ch.owner == s {
			ch.owner = nil
		}
	}
	c.mu.Unlock()
}

// session is one data-plane connection; its read loop handles every
// packet in order.
type session struct {
	c         *Connector
	ws        *websocket.Conn
	wmu       sync.Mutex
	hello     bool
	supported []string
	connID    string
}

func (s *session) run() {
	defer s.ws.Close()
	for {
		kind, data, err := s.ws.ReadMessage()
		if err != nil {
			return
		}
		if kind != websocket.TextMessage {
			s.fail(nil, imv2.CodeInvalidPacket, "text frames only")
			continue
		}
		p, err := imv2.DecodePacket(data)
		if err != nil {
			if s.c.has(SilentInvalid) {
				continue
			}
			var req *imv2.Packet
			if p != nil && p.PacketID != "" {
				req = p
			}
			s.send(imv2.NewErrorPacket(req, imv2.AsError(err, imv2.CodeInvalidPacket)))
			continue
		}
		s.dispatch(p)
	}
}

func (s *session) send(p *imv2.Packet) {
	data, err := p.Encode()
	if err != nil {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_ = s.ws.WriteMessage(websocket.TextMessage, data)
}

// sendRaw sends a packet whose payload is built here as a map, so flaws
// can add members the SDK's types would never carry.
func (s *session) sendRaw(p *imv2.Packet, payload map[string]any) {
	raw, _ := json.Marshal(payload)
	p.Payload = raw
	s.send(p)
}

func (s *session) fail(req *imv2.Packet, code imv2.Code, msg string) {
	s.send(imv2.NewErrorPacket(req, &imv2.Error{Code: code, Message: msg}))
}

func (s *session) reply(req *imv2.Packet, typ string, payload any) {
	p, err := imv2.NewResponse(req, typ, payload)
	if err != nil {
		return
	}
	s.send(p)
}

func (s *session) dispatch(p *imv2.Packet) {
	switch p.Type {
	case protocol.TypePing:
		r, _ := imv2.NewResponse(p, protocol.TypePong, nil)
		if s.c.has(NoRequestID) {
			r.RequestID = ""
		}
		s.send(r)
		return
	case protocol.TypePong, imv2.TypeError:
		return
	case protocol.TypeConnectorHello:
		s.onHello(p)
		return
	}
	if !s.hello {
		s.fail(p, protocol.CodeHelloRequired, "connector.hello first")
		return
	}
	switch p.Type {
	case protocol.TypeChannelOpen:
		s.onOpen(p)
		return
	}
	// Everything else is channel-scoped.
	if p.ConnectorChannelID == "" {
		s.fail(p, imv2.CodeChannelIDRequired, "connector_channel_id required")
		return
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.channels[p.ConnectorChannelID]
	if ch == nil || ch.owner != s {
		s.fail(p, imv2.CodeChannelNotOpen, "channel not open")
		return
	}
	switch p.Type {
	case protocol.TypeChannelClose:
		ch.owner, ch.closedOn = nil, s
		s.reply(p, protocol.TypeChannelCloseAck, protocol.StatusOK{Status: "ok"})
	case protocol.TypeDescriptorGet:
		s.reply(p, protocol.TypeDescriptorGetAck, protocol.DescriptorPayload{ConnectionDescriptor: s.descriptor(ch.id)})
	case imv2.TypeChatMessage:
		s.onMessage(ch, p)
	case imv2.TypeChatMessageDelta:
		s.onDelta(ch, p)
	case imv2.TypeChatMessageAck:
		s.onAck(ch, p)
	case imv2.TypeChatActivity:
		s.onActivity(ch, p)
	case protocol.TypeToolInvoke, protocol.TypeAuthStart, protocol.TypeAuthStatus, protocol.TypeAuthCancel, protocol.TypeAuthLogout:
		s.fail(p, imv2.CodeUnsupportedPacket, "no tools or auth flows")
	default:
		if c.has(AcceptSync) {
			s.onSync(ch, p)
		}
		// Otherwise: not in the negotiated profile, dropped silently (P6).
	}
}

func (s *session) onHello(p *imv2.Packet) {
	var h protocol.ConnectorHello
	if err := p.DecodePayload(&h); err != nil {
		s.fail(p, imv2.CodeInvalidPacket, "bad hello")
		return
	}
	if !s.c.has(LenientHello) {
		switch {
		case s.hello:
			s.fail(p, imv2.CodeInvalidPacket, "hello already done")
			return
		case h.ConnectorCardID != CardID:
			s.fail(p, protocol.CodeConnectorCardIDMismatch, "another card")
			return
		case s.c.has(ExactVersion) && h.ProtocolVersion != protocol.ProtocolVersion:
			s.fail(p, imv2.CodeInvalidPacket, "protocol_version 3.0 only")
			return
		case !versionAdmitted(h.ProtocolVersion):
			s.fail(p, imv2.CodeInvalidPacket, "protocol_version 3.0 or newer")
			return
		case h.SupportedProfiles == nil:
			s.fail(p, imv2.CodeInvalidPacket, "supported_profiles required")
			return
		}
	}
	c := s.c
	c.mu.Lock()
	if h.ConnectorID != "" && c.connectors[h.ConnectorID] {
		s.connID = h.ConnectorID
	} else {
		s.connID = "conn_" + uuid.NewString()
		c.connectors[s.connID] = true
	}
	c.mu.Unlock()
	s.hello = true
	s.supported = h.SupportedProfiles
	if c.has(LenientHello) && !slices.Contains(s.supported, imv2.ProfileIMv2) {
		s.supported = []string{imv2.ProfileIMv2} // enables the profile implicitly
	}
	s.reply(p, protocol.TypeConnectorHelloAck, protocol.ConnectorHelloAck{ConnectorCardID: CardID, ConnectorID: s.connID, ProtocolVersion: protocol.ProtocolVersion})
}

// versionAdmitted: xAgent's own version, 3.0 or newer (W4).
func versionAdmitted(s string) bool {
	v, err := protocol.ParseVersion(s)
	return err == nil && v.Compare(protocol.Version30) >= 0
}

func (s *session) descriptor(id string) *protocol.Descriptor {
	profiles := []string{imv2.ProfileIMv2}
	if s.c.has(DescriptorExtra) {
		profiles = append(profiles, "xagent.im.v1")
	}
	return &protocol.Descriptor{
		Schema: protocol.DescriptorSchema,
		Connection: protocol.Connection{
			ConnectorCardID: CardID, ConnectorID: s.connID, ConnectorChannelID: id,
			TargetType: imv2.TargetTypeIM, Profiles: profiles, Status: protocol.StatusConnected,
		},
		Target: protocol.DescriptorTarget{Provider: "broken", Label: "Broken", DisplayName: "Broken"},
	}
}

func (s *session) onOpen(p *imv2.Packet) {
	if !slices.Contains(s.supported, imv2.ProfileIMv2) {
		s.fail(p, imv2.CodeChannelUnavailable, "no profile in common")
		return
	}
	c := s.c
	c.mu.Lock()
	ch := c.channels[p.ConnectorChannelID]
	// NewIDOnReconnect keeps a channel only across a close and reopen on
	// the same connection; after a reconnect it has forgotten it.
	if ch == nil || (c.has(NewIDOnReconnect) && ch.closedOn != s) {
		ch = &channel{id: "cch_" + uuid.NewString(), streams: map[string]*stream{}, completed: map[string]imv2.Fingerprint{}}
		c.channels[ch.id] = ch
	}
	ch.owner, ch.closedOn = s, nil
	resend := slices.Clone(ch.pending)
	if c.has(ResendHistory) {
		resend = append(slices.Clone(ch.acked), resend...)
	}
	c.mu.Unlock()
	ack, _ := imv2.NewResponse(p, protocol.TypeChannelOpenAck, protocol.ChannelOpenAck{ConnectorChannelID: ch.id, ConnectionDescriptor: s.descriptor(ch.id)})
	ack.ConnectorChannelID = ch.id
	s.send(ack)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range resend {
		s.transmit(ch, u)
	}
}

// ---- chat.message ---------------------------------------------------------

func (s *session) decodeMessage(p *imv2.Packet) (*imv2.ChatMessage, error) {
	if s.c.has(RejectUnknownMembers) {
		// The pre-E5 closed reader: any member outside the struct fails.
		var m imv2.ChatMessage
		if err := jsonv2.Unmarshal(p.Payload, &m, jsonv2.RejectUnknownMembers(true)); err != nil {
			return nil, imv2.Errorf(imv2.CodeInvalidPacket, "unknown member")
		}
	}
	if s.c.has(DeepFileNames) {
		// The pre-reading walk: M8's names refused at every depth.
		var v any
		if err := json.Unmarshal(p.Payload, &v); err == nil {
			if name := deepFileName(v); name != "" {
				return nil, imv2.Errorf(imv2.CodeForbiddenField, "member %q is not allowed in a message", name)
			}
		}
	}
	if !s.c.has(AcceptUnknownFields) {
		return imv2.DecodeChatMessage(p, imv2.ToConnector)
	}
	m := new(imv2.ChatMessage)
	if err := json.Unmarshal(p.Payload, m); err != nil {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "bad payload")
	}
	return m, m.Validate(imv2.ToConnector)
}

// deepFileName returns the first file-content member name anywhere in v,
// or "".
func deepFileName(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch k {
			case "data", "bytes", "base64", "content", "content_base64", "body", "path", "local_path", "file_path",
				"token", "access_token", "auth", "authorization", "cookie", "headers", "credentials", "secret":
				return k
			}
			if n := deepFileName(x); n != "" {
				return n
			}
		}
	case []any:
		for _, x := range v {
			if n := deepFileName(x); n != "" {
				return n
			}
		}
	}
	return ""
}

// onMessage handles a final (c.mu held).
func (s *session) onMessage(ch *channel, p *imv2.Packet) {
	c := s.c
	m, err := s.decodeMessage(p)
	if err != nil {
		var head struct {
			MessageID string `json:"message_id"`
		}
		_ = json.Unmarshal(p.Payload, &head)
		if head.MessageID == "" {
			s.send(imv2.NewErrorPacket(p, imv2.AsError(err, imv2.CodeInvalidPacket)))
			return
		}
		e := imv2.AsError(err, imv2.CodeInvalidPacket)
		s.ack(p, head.MessageID, imv2.AckRejected, &imv2.Error{Code: e.Code, Message: e.Message})
		return
	}
	fp := imv2.FingerprintOf(m)
	if c.has(FingerprintURL) {
		h := sha256.New()
		h.Write(fp[:])
		for _, f := range m.Files {
			fmt.Fprintf(h, "%d:%s:%d", len(f.DownloadURL), f.DownloadURL, f.ExpiresAt)
		}
		h.Sum(fp[:0])
	}
	if old, done := ch.completed[m.MessageID]; done && !c.has(NoDedup) {
		if old == fp {
			s.ack(p, m.MessageID, imv2.AckDuplicate, nil)
		} else {
			s.ack(p, m.MessageID, imv2.AckRejected, &imv2.Error{Code: imv2.CodeMessageIDConflict, Message: "other content"})
		}
		return
	}
	if !c.has(AcceptUnknownFile) {
		for _, f := range m.Files {
			rc, _, err := c.files.OpenFile(context.Background(), ch.id, f.FileRef)
			if err != nil {
				s.ack(p, m.MessageID, imv2.AckRejected, &imv2.Error{Code: imv2.CodeTargetRejected, Message: "file_ref not uploaded to this channel"})
				return
			}
			rc.Close()
		}
	}
	if c.has(RejectRetryable) {
		s.ack(p, m.MessageID, imv2.AckRejected, &imv2.Error{Code: imv2.CodeTargetDeliveryFailed, Message: "platform rate limit", Retryable: true})
		return
	}
	st := ch.streams[m.MessageID]
	delete(ch.streams, m.MessageID)
	ch.completed[m.MessageID] = fp
	if ch.temp == m.MessageID {
		ch.temp = ""
	}
	var posts []imv2test.Event
	if ch.typing {
		ch.typing = false
		posts = append(posts, imv2test.Event{Event: "typing_clear"})
	}
	if c.has(Placeholder) {
		dots := "…"
		posts = append(posts, imv2test.Event{Event: "post", MessageID: m.MessageID, Text: &dots})
	}
	if c.has(FinalTwice) && st != nil {
		stitched := st.text.String()
		posts = append(posts, imv2test.Event{Event: "final", MessageID: m.MessageID, Text: &stitched})
	}
	final := imv2test.Event{Event: "final", MessageID: m.MessageID, Text: &m.Text}
	if !c.has(DropFiles) {
		for _, f := range m.Files {
			final.Files = append(final.Files, imv2test.EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
		}
	}
	posts = append(posts, final)
	if c.has(DraftOvertakes) && st == nil && !c.cfg.Buffered {
		// A rate-limited post retried in the background, holding nothing:
		// the channel's next message streams its drafts meanwhile.
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			time.Sleep(c.cfg.PostDelay)
			for _, e := range posts {
				c.cfg.Sink(e)
			}
			s.ack(p, m.MessageID, imv2.AckAccepted, nil)
		}()
		return
	}
	if c.has(AckBeforePost) {
		s.ack(p, m.MessageID, imv2.AckAccepted, nil)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			time.Sleep(c.cfg.PostDelay)
			for _, e := range posts {
				c.cfg.Sink(e)
			}
		}()
		return
	}
	post := func() {
		for _, e := range posts {
			c.cfg.Sink(e)
		}
		s.ack(p, m.MessageID, imv2.AckAccepted, nil)
	}
	if !c.cfg.Buffered || c.has(FinalsInArrivalOrder) {
		post()
		return
	}
	place := ch.places + 1
	if st != nil {
		place = st.place
	} else {
		ch.places++
	}
	if ch.startedBefore(place) {
		h := heldFinal{place: place, post: post}
		h.timer = time.AfterFunc(holdFinalsFor, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			ch.release(func(f heldFinal) bool { return f.place <= place })
		})
		ch.held = append(ch.held, h)
		slices.SortFunc(ch.held, func(a, b heldFinal) int { return cmp.Compare(a.place, b.place) })
		return
	}
	post()
	ch.release(nil)
}

// startedBefore reports whether a reply that started before place has
// not ended: a stream without its final, or a held final.
func (ch *channel) startedBefore(place uint64) bool {
	for _, st := range ch.streams {
		if st.place < place {
			return true
		}
	}
	return len(ch.held) > 0 && ch.held[0].place < place
}

// release posts the held finals that may go now, in order: those with no
// earlier reply still open, and those due picks (waited long enough).
func (ch *channel) release(due func(heldFinal) bool) {
	for len(ch.held) > 0 {
		f := ch.held[0]
		open := false
		for _, st := range ch.streams {
			if st.place < f.place {
				open = true
			}
		}
		if open && (due == nil || !due(f)) {
			return
		}
		ch.held = ch.held[1:]
		f.timer.Stop()
		f.post()
	}
}

// ack answers a chat.message, with the flaws that spoil acks.
func (s *session) ack(p *imv2.Packet, messageID string, status imv2.AckStatus, rej *imv2.Error) {
	c := s.c
	a, err := imv2.NewAck(p, messageID, status, rej)
	if err != nil {
		return
	}
	if c.has(AckReplyToMessageID) {
		a.ReplyTo = messageID
	}
	if c.has(NoRequestID) {
		a.RequestID = ""
	}
	if !c.has(LeakSessionID) {
		s.send(a)
		return
	}
	var payload map[string]any
	_ = json.Unmarshal(a.Payload, &payload)
	payload["session_id"] = "sess_" + s.connID
	s.sendRaw(a, payload)
}

// ---- deltas ----------------------------------------------------------------

func (s *session) onDelta(ch *channel, p *imv2.Packet) {
	c := s.c
	var d *imv2.ChatMessageDelta
	var err error
	if c.has(LenientDelta) {
		d = new(imv2.ChatMessageDelta)
		err = json.Unmarshal(p.Payload, d)
	} else {
		d, err = imv2.DecodeChatMessageDelta(p)
	}
	if err != nil {
		s.send(imv2.NewErrorPacket(p, imv2.AsError(err, imv2.CodeInvalidPacket)))
		return
	}
	if _, done := ch.completed[d.MessageID]; done {
		return // D11
	}
	now := time.Now()
	unbounded := c.has(UnboundedDeltas)
	if !unbounded {
		for id, st := range ch.streams {
			if now.Sub(st.touched) >= c.cfg.DeltaIdleTTL {
				delete(ch.streams, id)
			}
		}
	}
	st := ch.streams[d.MessageID]
	opening := st == nil
	if st == nil {
		if !unbounded && len(ch.streams) >= c.cfg.MaxOpenDeltas {
			s.fail(p, imv2.CodeDeltaLimitExceeded, "too many open delta streams")
			return
		}
		if d.Sequence != 1 && !c.has(StitchGaps) {
			s.fail(p, imv2.CodeDeltaSequenceGap, "a stream starts at 1")
			return
		}
		ch.places++
		st = &stream{place: ch.places}
		ch.streams[d.MessageID] = st
	}
	n := int64(len(st.ends))
	st.touched = now
	switch {
	case d.Sequence <= n && !c.has(StitchGaps):
		start := 0
		if d.Sequence > 1 {
			start = st.ends[d.Sequence-2]
		}
		if st.text.String()[start:st.ends[d.Sequence-1]] != d.Text {
			s.fail(p, imv2.CodeDeltaSequenceConflict, "same sequence, other text")
		}
		return
	case d.Sequence > n+1 && !c.has(StitchGaps):
		s.fail(p, imv2.CodeDeltaSequenceGap, "gap")
		return
	}
	if !unbounded && st.text.Len()+len(d.Text) > c.cfg.MaxDeltaBytes {
		s.fail(p, imv2.CodeDeltaLimitExceeded, "text too long")
		return
	}
	st.text.WriteString(d.Text)
	st.ends = append(st.ends, st.text.Len())
	st.touched = now
	text := st.text.String()
	switch {
	case c.cfg.Buffered && c.has(BufferTempText):
		c.cfg.Sink(imv2test.Event{Event: "post", MessageID: d.MessageID, Text: &text})
	case c.cfg.Buffered, c.has(NoDrafts):
	default:
		if ch.typing {
			ch.typing = false
			c.cfg.Sink(imv2test.Event{Event: "typing_clear"})
		}
		ev := imv2test.Event{Event: "draft", MessageID: d.MessageID, Text: &text}
		if c.has(EditOtherReply) {
			// The edit names the message it changed, the one that posted
			// the temporary message, whichever reply the text is of.
			ev.Event = "post"
			if ch.temp != "" {
				ev.Event, ev.MessageID = "edit", ch.temp
			}
			ch.temp = ev.MessageID
		}
		if c.has(FirstDraftOvertakes) && opening && len(ch.streams) == 1 {
			// The first draft of the channel's only stream is rate-limited
			// and retried in the background, holding nothing: a stream
			// opened meanwhile shows its first draft at once, above it.
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				time.Sleep(c.cfg.PostDelay)
				c.cfg.Sink(ev)
			}()
			return
		}
		c.cfg.Sink(ev)
	}
}

// ---- activity, sync ----------------------------------------------------------

func (s *session) onActivity(ch *channel, p *imv2.Packet) {
	c := s.c
	if c.has(ActivityUnsupported) {
		s.fail(p, imv2.CodeUnsupportedPacket, "no activity here")
		return
	}
	a, err := imv2.DecodeChatActivity(p)
	if err == nil && c.has(PlainToolName) && strings.ContainsAny(a.ToolName, " /") {
		err = imv2.Errorf(imv2.CodeForbiddenField, "tool_name must be a plain name")
	}
	if err != nil {
		if !c.has(IgnoreBadActivity) {
			s.send(imv2.NewErrorPacket(p, imv2.AsError(err, imv2.CodeInvalidPacket)))
		}
		return
	}
	if a.Status == imv2.ActivityIdle {
		if ch.typing {
			ch.typing = false
			c.cfg.Sink(imv2test.Event{Event: "typing_clear"})
		}
		return
	}
	ch.typing = true
	c.cfg.Sink(imv2test.Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	if c.has(ActivityForever) {
		return
	}
	if ch.typeTimer != nil {
		ch.typeTimer.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(c.cfg.ActivityTimeout, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if ch.typeTimer == t && ch.typing && !c.closed {
			ch.typing = false
			c.cfg.Sink(imv2test.Event{Event: "typing_clear"})
		}
	})
	ch.typeTimer = t
}

// onSync is AcceptSync: history shown and acked like a final.
func (s *session) onSync(ch *channel, p *imv2.Packet) {
	var m struct {
		MessageID string `json:"message_id"`
		Text      string `json:"text"`
	}
	_ = json.Unmarshal(p.Payload, &m)
	if m.MessageID == "" {
		m.MessageID = "sync_" + p.PacketID
	}
	text := m.Text
	s.c.cfg.Sink(imv2test.Event{Event: "final", MessageID: m.MessageID, Text: &text})
	ack := &imv2.Packet{Schema: imv2.PacketSchema, PacketID: imv2.NewPacketID(), ReplyTo: p.PacketID,
		ConnectorChannelID: ch.id, Type: imv2.TypeChatMessageAck, Time: time.Now().UnixMilli()}
	s.sendRaw(ack, map[string]any{"message_id": m.MessageID, "status": "accepted"})
}

// ---- user messages -----------------------------------------------------------

func (s *session) onAck(ch *channel, p *imv2.Packet) {
	if s.c.has(StrictAckText) {
		var w struct{ Code, Message string }
		if json.Unmarshal(p.Payload, &w) == nil && (len(w.Message) > 1024 || len(w.Code) > 256) {
			s.fail(p, imv2.CodeInvalidPacket, "ack message or code too long")
			return
		}
	}
	a, err := imv2.DecodeChatMessageAck(p)
	if err != nil {
		s.send(imv2.NewErrorPacket(p, imv2.AsError(err, imv2.CodeInvalidPacket)))
		return
	}
	for i, u := range ch.pending {
		if u.msg.MessageID != a.MessageID || !slices.Contains(u.packets, p.ReplyTo) {
			continue
		}
		if a.Status == imv2.AckRejected && a.Retryable {
			return
		}
		ch.pending = slices.Delete(ch.pending, i, i+1)
		ch.acked = append(ch.acked, u)
		ev := "sent"
		if a.Status == imv2.AckRejected {
			ev = "failed"
		}
		text := u.msg.Text
		s.c.cfg.Sink(imv2test.Event{Event: ev, MessageID: u.msg.MessageID, Text: &text, Code: string(a.Code)})
		return
	}
}

// transmit sends a user message on the channel's owner (c.mu held).
func (s *session) transmit(ch *channel, u *userMsg) {
	p, err := imv2.NewChatMessage(ch.id, imv2.ToXAgent, u.msg)
	if err != nil {
		return
	}
	u.packets = append(u.packets, p.PacketID)
	if !s.c.has(LeakSessionID) {
		s.send(p)
		return
	}
	var payload map[string]any
	_ = json.Unmarshal(p.Payload, &payload)
	payload["user_id"] = "user_42"
	s.sendRaw(p, payload)
}

// Say sends a user message on channelID (imv2test.User).
func (c *Connector) Say(_ context.Context, channelID, text string) error {
	return c.say(channelID, imv2.ChatMessage{MessageID: imv2.NewMessageID(), Text: text})
}

// SendFile offers a file and sends a file-only user message (imv2test.User).
func (c *Connector) SendFile(ctx context.Context, channelID, filename string, data []byte) error {
	f, err := c.files.OfferFile(ctx, channelID, filename, "", bytes.NewReader(data))
	if err != nil {
		return err
	}
	if c.has(UnsignedDownload) {
		f.DownloadURL = "/files/refs/" + f.FileRef
	}
	return c.say(channelID, imv2.ChatMessage{MessageID: imv2.NewMessageID(), Files: []imv2.File{f}})
}

func (c *Connector) say(channelID string, m imv2.ChatMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.channels[channelID]
	if ch == nil {
		return errors.New("brokenconnector: unknown channel")
	}
	u := &userMsg{msg: m}
	ch.pending = append(ch.pending, u)
	if ch.owner != nil {
		ch.owner.transmit(ch, u)
	}
	return nil
}

var _ io.Closer = (*Connector)(nil)
