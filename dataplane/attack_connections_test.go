package dataplane

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
)

// Attacks of issue 26 (attack 1, memory outside the budget, and the
// second holder of a connector_id) replayed over real loopback
// WebSockets; see ATTACK_ROWS.md.

// TestAttack_SecondHelloForAnOnlineConnectorIDRefused: a key-holder says
// hello with the connector_id of a peer that is online. It is refused
// connector_id_mismatch (retryable), cannot open the victim's channel, and
// the victim keeps receiving its user messages. Once the victim's
// connection ended, the connector_id can be taken again (a reconnect).
// Before, the second hello was admitted, its channel.open took the
// victim's channel over and the user message went to the attacker.
func TestAttack_SecondHelloForAnOnlineConnectorIDRefused(t *testing.T) {
	srv, url := startServer(t, func(c *ServerConfig) { c.APIKey = attackKey })
	victim := dialPeer(t, url, authHeader())
	id := victim.hello("")
	ch, _ := victim.open("")

	attacker := dialPeer(t, url, authHeader())
	ans := attacker.call(protocol.TypeConnectorHello, "", goodHello(id))
	expectError(t, ans, protocol.CodeConnectorIDMismatch)
	expectError(t, attacker.call(protocol.TypeChannelOpen, ch, nil), protocol.CodeHelloRequired)

	_, err := srv.Channel(ch).Send(ctxWait(t), imv2.ChatMessage{MessageID: "u1", Text: "for the victim"})
	require.NoError(t, err)
	got := victim.next()
	require.Equal(t, imv2.TypeChatMessage, got.Type)
	assert.Equal(t, ch, got.ConnectorChannelID)

	require.NoError(t, victim.conn.Close())
	waitDetached(t, srv, id)
	assert.Equal(t, id, dialPeer(t, url, authHeader()).hello(id), "offline, the connector_id is taken again")
}

// TestAttack_HelloListsCapped: a hello carrying 100,000
// supported_profiles (≈ 400 KB, under the 1 MiB frame limit) is not read:
// before its hello a connection reads frames of at most helloReadLimit,
// so it is closed 1009. A hello of MaxHelloProfiles+1 entries, or with an
// entry over MaxProfileIDBytes, is refused invalid_packet. Before, the
// session kept the whole list (≈ 5 MB per connection as decoded), and
// 300 such connections took the console to 1.55 GB.
func TestAttack_HelloListsCapped(t *testing.T) {
	_, url := startServer(t, func(c *ServerConfig) { c.APIKey = attackKey })

	big := goodHello("")
	big.SupportedProfiles = make([]string, 100_000)
	for i := range big.SupportedProfiles {
		big.SupportedProfiles[i] = "p"
	}
	p := dialPeer(t, url, authHeader())
	pkt, err := imv2.NewPacket(protocol.TypeConnectorHello, "", big)
	require.NoError(t, err)
	_ = p.conn.Write(ctxWait(t), pkt) // may fail: the Server closes before the frame is all written
	_, err = p.conn.Read(ctxWait(t))
	code, ok := CloseCode(err)
	require.True(t, ok, "the connection is closed, not answered: %v", err)
	assert.Equal(t, websocket.CloseMessageTooBig, code)

	q := dialPeer(t, url, authHeader())
	many := goodHello("")
	for len(many.SupportedProfiles) <= MaxHelloProfiles {
		many.SupportedProfiles = append(many.SupportedProfiles, imv2.ProfileIMv2)
	}
	expectError(t, q.call(protocol.TypeConnectorHello, "", many), imv2.CodeInvalidPacket)
	long := goodHello("")
	long.SupportedProfiles = append(long.SupportedProfiles, strings.Repeat("p", MaxProfileIDBytes+1))
	expectError(t, q.call(protocol.TypeConnectorHello, "", long), imv2.CodeInvalidPacket)
	q.hello("") // the connection stays usable for a hello within the caps
	ch, _ := q.open("")
	// After the hello, frames up to ReadLimit are read again.
	q.write(finalMessage(ch, "big", strings.Repeat("x", 512<<10)))
	assert.Equal(t, imv2.AckAccepted, mustAck(t, q.next()).Status)
}

// TestAttack_UnfinishedMessageIsCut: after its hello a peer begins a
// 512 KiB message in fragments and never sends the last one, while
// answering every keepalive ping. The pong check that follows a ping
// finds the same message still being read and closes the connection,
// freeing its buffer. Before, the pongs kept it alive for good (300 such
// connections held 60 s, none closed).
func TestAttack_UnfinishedMessageIsCut(t *testing.T) {
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	pongs := make(chan struct{}, 4)
	srv, url := startServer(t, func(c *ServerConfig) {
		c.APIKey = attackKey
		c.Clock = clk
		c.Conn.onPong = func() { pongs <- struct{}{} }
	})
	d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
	ws, resp, err := d.Dial(url, authHeader())
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	hello, err := imv2.NewPacket(protocol.TypeConnectorHello, "", goodHello(""))
	require.NoError(t, err)
	data, err := hello.Encode()
	require.NoError(t, err)
	require.NoError(t, ws.WriteMessage(websocket.TextMessage, data))
	require.Equal(t, protocol.TypeConnectorHelloAck, readRaw(t, ws).Type)
	require.NoError(t, ws.SetReadDeadline(time.Time{})) // readRaw's

	// The attacker's reader answers pings (gorilla's default handler)
	// and sees the close.
	ended := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				ended <- err
				return
			}
		}
	}()
	w, err := ws.NextWriter(websocket.TextMessage)
	require.NoError(t, err)
	_, err = w.Write([]byte(`{"type":"` + strings.Repeat("x", 512<<10)))
	require.NoError(t, err) // fragments flushed; the last one never goes

	var sc *wsConn
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for ss := range srv.sessions {
			sc, _ = ss.conn.(*wsConn)
		}
		return sc != nil && sc.reading.Load()%2 == 1
	}, wait, time.Millisecond, "the server is reading the message")

	clk.Advance(DefaultPingInterval)
	recv(t, pongs) // the attacker is alive by the keepalive's measure
	clk.Advance(DefaultPongTimeout)
	select {
	case err := <-ended:
		require.Error(t, err)
	case <-time.After(wait):
		t.Fatal("a message begun before a ping and unfinished at its pong check kept the connection open")
	}
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.sessions) == 0
	}, wait, time.Millisecond)
}
