package dataplane

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wait bounds how long a test waits for an asynchronous outcome before it
// fails: a deadline for network I/O, never an assertion on speed.
const wait = 5 * time.Second

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

const testCardID = "im.test"

func testCard() *protocol.Card {
	return &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{BuildTime: "2611300000"},
		ConnectorCardID: testCardID,
		Connector:       protocol.CardInfo{Name: "Test IM", Version: "0.0.1"},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "testim", Label: "Test IM"}},
			Profiles:    []string{imv2.ProfileIMv2},
		},
		Tools: []protocol.Tool{{
			ToolID:      "test_send",
			Profile:     imv2.ProfileIMv2,
			InputSchema: json.RawMessage(`{"type":"object","required":["connector_channel_id"],"properties":{"connector_channel_id":{"type":"string"}}}`),
		}},
		AuthFlows: []protocol.AuthFlow{{ID: "test_qr", TargetType: imv2.TargetTypeIM, Type: "qr_login", Title: "QR"}},
	}
}

// recTarget records complete messages and drafts, per channel.
type recTarget struct {
	mu     sync.Mutex
	posts  map[string]int // message_id → PostMessage calls
	texts  map[string]string
	drafts []string
	got    chan *imv2.ChatMessage
	shown  chan string
}

func newRecTarget() *recTarget {
	return &recTarget{posts: map[string]int{}, texts: map[string]string{}, got: make(chan *imv2.ChatMessage, 256), shown: make(chan string, 256)}
}

func (r *recTarget) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	r.mu.Lock()
	r.posts[m.MessageID]++
	r.texts[m.MessageID] = m.Text
	r.mu.Unlock()
	r.got <- m
	return nil
}

func (r *recTarget) UpdateDraft(_ context.Context, _, _, text string) error {
	r.mu.Lock()
	r.drafts = append(r.drafts, text)
	r.mu.Unlock()
	r.shown <- text
	return nil
}

func (r *recTarget) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts[id]
}

func (r *recTarget) draftList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.drafts...)
}

func (r *recTarget) next(t *testing.T) *imv2.ChatMessage {
	t.Helper()
	return recv(t, r.got)
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	return testwait.Recv(t, ch, wait)
}

// startServer runs a Server behind httptest and returns it with its ws URL.
// Cleanup closes both.
func startServer(t *testing.T, mod func(*ServerConfig)) (*Server, string) {
	t.Helper()
	cfg := ServerConfig{
		Card:      testCard(),
		NewTarget: func(string) imv2.Target { return newRecTarget() },
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := NewServer(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(withCard(cfg.Card, srv))
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	return srv, "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
}

// withCard serves card at /connector-card.json and everything else with
// h, as connector.Handler does in front of a Server.
func withCard(card *protocol.Card, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
	})
	mux.Handle("/", h)
	return mux
}

// httpBase turns a ws://…/ws URL of startServer into the Connector base
// URL a Client dials.
func httpBase(ws string) string {
	return "http" + strings.TrimSuffix(strings.TrimPrefix(ws, "ws"), "/ws")
}

// dropConnections ends every live connection from the server side, as a
// network failure would, and waits until the server detached them.
func (s *Server) dropConnections() {
	s.mu.Lock()
	var sessions []*session
	for ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		_ = ss.conn.Close()
		<-ss.ended
	}
}

// peer is a hand-driven xAgent side over a real WebSocket: the test writes
// packets and reads answers one by one.
type peer struct {
	t    *testing.T
	ws   *websocket.Conn
	conn *wsConn
}

func dialPeer(t *testing.T, url string, header http.Header) *peer {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
	ws, resp, err := d.Dial(url, header)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	require.NoError(t, err)
	require.Equal(t, protocol.Subprotocol, ws.Subprotocol())
	p := &peer{t: t, ws: ws, conn: newWSConn(ws, ConnConfig{})}
	t.Cleanup(func() { _ = p.conn.Close() })
	return p
}

// send writes a request packet with a fresh request_id and returns it.
func (p *peer) send(typ, channel string, payload any) *imv2.Packet {
	p.t.Helper()
	pkt, err := imv2.NewPacket(typ, channel, payload)
	require.NoError(p.t, err)
	pkt.RequestID = "req_" + pkt.PacketID
	p.write(pkt)
	return pkt
}

func (p *peer) write(pkt *imv2.Packet) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(p.t, p.conn.Write(ctx, pkt))
}

// rawText writes one text frame as is, through the peer's writer.
func (p *peer) rawText(data string) {
	p.t.Helper()
	require.NoError(p.t, p.rawTextErr(data))
}

func (p *peer) rawTextErr(data string) error {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return p.conn.writeData(ctx, []byte(data))
}

// dialRaw opens a bare gorilla connection, for frames a Conn never sends.
func dialRaw(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
	ws, resp, err := d.Dial(url, nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// readRaw reads one packet from a bare connection.
func readRaw(t *testing.T, ws *websocket.Conn) *imv2.Packet {
	t.Helper()
	require.NoError(t, ws.SetReadDeadline(time.Now().Add(wait)))
	mt, data, err := ws.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, websocket.TextMessage, mt)
	pkt, err := imv2.DecodePacket(data)
	require.NoError(t, err)
	return pkt
}

// next reads the next packet, failing after wait.
func (p *peer) next() *imv2.Packet {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	pkt, err := p.conn.Read(ctx)
	require.NoError(p.t, err)
	return pkt
}

// call sends a request and returns the next packet, checking it answers
// the request (W9).
func (p *peer) call(typ, channel string, payload any) *imv2.Packet {
	p.t.Helper()
	req := p.send(typ, channel, payload)
	ans := p.next()
	require.Equal(p.t, req.RequestID, ans.RequestID, "W9: request_id echoed (%s → %s)", typ, ans.Type)
	require.Equal(p.t, req.PacketID, ans.ReplyTo, "W9: reply_to = request packet_id (%s → %s)", typ, ans.Type)
	return ans
}

// expectError checks ans is a type "error" packet with code.
func expectError(t *testing.T, ans *imv2.Packet, code imv2.Code) {
	t.Helper()
	require.Equal(t, imv2.TypeError, ans.Type, "want error %s, got %s", code, ans.Type)
	require.NotNil(t, ans.Error)
	require.Equal(t, code, ans.Error.Code, "message: %s", ans.Error.Message)
	require.NotEmpty(t, ans.Error.Message)
}

func goodHello(connectorID string) protocol.ConnectorHello {
	return protocol.ConnectorHello{
		ConnectorCardID:   testCardID,
		ConnectorID:       connectorID,
		ProtocolVersion:   protocol.ProtocolVersion,
		SupportedProfiles: []string{imv2.ProfileIMv2},
	}
}

// hello completes a hello and returns the connector_id.
func (p *peer) hello(connectorID string) string {
	p.t.Helper()
	ans := p.call(protocol.TypeConnectorHello, "", goodHello(connectorID))
	require.Equal(p.t, protocol.TypeConnectorHelloAck, ans.Type, "hello answered %+v", ans.Error)
	var ack protocol.ConnectorHelloAck
	require.NoError(p.t, ans.DecodePayload(&ack))
	require.Equal(p.t, testCardID, ack.ConnectorCardID)
	require.Equal(p.t, protocol.ProtocolVersion, ack.ProtocolVersion)
	require.NotEmpty(p.t, ack.ConnectorID, "W4: hello.ack always carries connector_id")
	return ack.ConnectorID
}

// open opens a channel and returns the ack's ID and descriptor.
func (p *peer) open(id string) (string, *protocol.Descriptor) {
	p.t.Helper()
	ans := p.call(protocol.TypeChannelOpen, id, nil)
	require.Equal(p.t, protocol.TypeChannelOpenAck, ans.Type, "open answered %+v", ans.Error)
	var ack protocol.ChannelOpenAck
	require.NoError(p.t, ans.DecodePayload(&ack))
	require.NotEmpty(p.t, ans.ConnectorChannelID)
	require.Equal(p.t, ans.ConnectorChannelID, ack.ConnectorChannelID, "W5: id in envelope and payload")
	require.NotNil(p.t, ack.ConnectionDescriptor, "W5: descriptor in the ack")
	return ans.ConnectorChannelID, ack.ConnectionDescriptor
}

func userMessage(channel, id, text string) *imv2.Packet {
	p, err := imv2.NewChatMessage(channel, imv2.ToXAgent, imv2.ChatMessage{MessageID: id, Text: text})
	if err != nil {
		panic(err)
	}
	return p
}

func finalMessage(channel, id, text string) *imv2.Packet {
	p, err := imv2.NewChatMessage(channel, imv2.ToConnector, imv2.ChatMessage{MessageID: id, Text: text})
	if err != nil {
		panic(err)
	}
	return p
}

func ctxWait(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}
