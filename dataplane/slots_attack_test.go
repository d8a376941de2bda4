package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/readmetable"
	"github.com/xagentkit/imv2/protocol"
)

// TestAttack_HellosWithChannelsDoNotLockOutNewcomers (issue 37): an xAgent
// holds a connector_id whose channel has a user message pending, offline;
// then 63 hellos each open one channel and go away, filling the 64 slots.
// A fresh xAgent session still gets a connector_id, within a second: the
// offline connector_id seen least recently with nothing pending gives way
// (makeRoom). The one with a pending message keeps its slot and its
// message. Before, every fresh hello was refused connector_id_mismatch for
// the 1 h offline grace.
func TestAttack_HellosWithChannelsDoNotLockOutNewcomers(t *testing.T) {
	srv, url := startServer(t, func(c *ServerConfig) { c.APIKey = attackKey })
	victim := dialPeer(t, url, authHeader())
	victimID := victim.hello("")
	victimCh, _ := victim.open("")
	require.NoError(t, victim.conn.Close())
	waitDetached(t, srv, victimID)
	_, err := srv.Channel(victimCh).Send(context.Background(), imv2.ChatMessage{MessageID: "u1", Text: "while you were away"})
	require.NoError(t, err)

	var first string
	for i := range DefaultMaxConnectors - 1 {
		a := dialPeer(t, url, authHeader())
		id := a.hello("")
		a.open("")
		if i == 0 {
			first = id
		}
		require.NoError(t, a.conn.Close())
		waitDetached(t, srv, id)
	}
	srv.mu.Lock()
	require.Len(t, srv.instances, DefaultMaxConnectors, "the slots are full")
	srv.mu.Unlock()

	fresh := dialPeer(t, url, authHeader())
	start := time.Now()
	ans := fresh.call(protocol.TypeConnectorHello, "", goodHello(""))
	took := time.Since(start)
	require.Equal(t, protocol.TypeConnectorHelloAck, ans.Type, "a newcomer gets in: %+v", ans.Error)
	assert.Less(t, took, time.Second)
	t.Logf("fresh hello admitted in %v", took)
	fresh.open("")

	srv.mu.Lock()
	assert.Len(t, srv.instances, DefaultMaxConnectors)
	assert.Contains(t, srv.instances, victimID, "the connector_id with a pending message keeps its slot")
	assert.NotContains(t, srv.instances, first, "the least recently seen one with nothing pending gave way")
	srv.mu.Unlock()

	back := dialPeer(t, url, authHeader())
	require.Equal(t, victimID, back.hello(victimID))
	again, _ := back.open(victimCh)
	require.Equal(t, victimCh, again)
	m := back.next()
	require.Equal(t, imv2.TypeChatMessage, m.Type)
	um, err := imv2.DecodeChatMessage(m, imv2.ToXAgent)
	require.NoError(t, err)
	require.Equal(t, "u1", um.MessageID, "the pending message survived")
}

// TestAttack_SlotsHeldOnlineOrPendingRefuseNewcomers: when every slot is
// online or holds a pending message, a fresh hello is refused
// connector_id_mismatch and nothing is evicted: nothing may be lost to
// make room.
func TestAttack_SlotsHeldOnlineOrPendingRefuseNewcomers(t *testing.T) {
	srv, url := startServer(t, func(c *ServerConfig) {
		c.APIKey = attackKey
		c.MaxConnectors = 3
	})
	held := dialPeer(t, url, authHeader())
	held.hello("")
	held.open("")
	for i := range 2 {
		p := dialPeer(t, url, authHeader())
		id := p.hello("")
		ch, _ := p.open("")
		require.NoError(t, p.conn.Close())
		waitDetached(t, srv, id)
		_, err := srv.Channel(ch).Send(context.Background(), imv2.ChatMessage{MessageID: "u" + string(rune('0'+i)), Text: "pending"})
		require.NoError(t, err)
	}
	ans := dialPeer(t, url, authHeader()).call(protocol.TypeConnectorHello, "", goodHello(""))
	expectError(t, ans, protocol.CodeConnectorIDMismatch)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	assert.Len(t, srv.instances, 3)
}

// TestREADME_ConnectorSlotsRow: the README's limits row on connector_id
// slots gives DefaultMaxConnectors and DefaultOfflineGrace.
func TestREADME_ConnectorSlotsRow(t *testing.T) {
	rows, err := readmetable.Rows("../README.md")
	require.NoError(t, err)
	const label = "connector_id slots (xAgent sessions) per Connector"
	require.Equal(t, "dataplane", readmetable.Elsewhere[label])
	require.NoError(t, readmetable.Check(rows, label, []string{readmetable.Count(DefaultMaxConnectors), readmetable.Dur(DefaultOfflineGrace)}))
}
