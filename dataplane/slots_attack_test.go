package dataplane

import (
	"context"
	"fmt"
	"sync"
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

// countingPending records the channels whose entries were listed; with
// owner set, the first channel of each instance listed reads as empty, so
// every candidate costs all of its channels' reads.
type countingPending struct {
	imv2.PendingStore
	mu     sync.Mutex
	listed []string
	owner  map[string]int // channel → instance
	seen   map[int]bool
}

func (c *countingPending) List(ctx context.Context, channelID string) ([]imv2.PendingEntry, error) {
	c.mu.Lock()
	c.listed = append(c.listed, channelID)
	first := false
	if inst, ok := c.owner[channelID]; ok && !c.seen[inst] {
		c.seen[inst], first = true, true
	}
	c.mu.Unlock()
	if first {
		return nil, nil
	}
	return c.PendingStore.List(ctx, channelID)
}

// take returns the channels listed since the last take and starts over.
func (c *countingPending) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.listed
	c.listed, c.seen = nil, map[int]bool{}
	return l
}

// TestAttack_FullSlotsCostAHelloBoundedReads: every slot is offline with
// its channels holding pending messages; a fresh hello is refused having
// read the pending store of at most roomReads·MaxChannels channels,
// however many instances and channels there are. Each candidate here
// costs all its channels' reads (the first reads as empty), so the
// bound, not the candidates' count, stops the hello: 4 of the 8
// candidates are read (all 8 without it).
func TestAttack_FullSlotsCostAHelloBoundedReads(t *testing.T) {
	pending := &countingPending{PendingStore: imv2.NewMemoryPendingStore(0), seen: map[int]bool{}}
	srv, url := startServer(t, func(c *ServerConfig) {
		c.APIKey = attackKey
		c.MaxConnectors = 12
		c.MaxChannels = 2
		c.Options = &imv2.Options{Pending: pending}
	})
	owner := map[string]int{}
	for i := range 12 {
		p := dialPeer(t, url, authHeader())
		id := p.hello("")
		var chans []string
		for range 2 {
			ch, _ := p.open("")
			chans = append(chans, ch)
			owner[ch] = i
		}
		require.NoError(t, p.conn.Close())
		waitDetached(t, srv, id)
		for _, ch := range chans {
			_, err := srv.Channel(ch).Send(context.Background(), imv2.ChatMessage{MessageID: fmt.Sprintf("u%d", i), Text: "pending"})
			require.NoError(t, err)
		}
	}
	pending.take()
	pending.mu.Lock()
	pending.owner = owner
	pending.mu.Unlock()
	ans := dialPeer(t, url, authHeader()).call(protocol.TypeConnectorHello, "", goodHello(""))
	expectError(t, ans, protocol.CodeConnectorIDMismatch)
	listed := pending.take()
	instances := map[int]bool{}
	for _, ch := range listed {
		instances[owner[ch]] = true
	}
	t.Logf("a refused hello read %d channels of %d instances", len(listed), len(instances))
	assert.Equal(t, roomReads*2, len(listed))
	assert.Len(t, instances, roomReads)
}
