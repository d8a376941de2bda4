package dataplane

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

// Attack 3 of issue 26 (fairness) over real loopback WebSockets: several
// connector_ids fill the Server budget; see ATTACK_ROWS.md.

// fairnessServer is a Server of 8 MiB, 2 MiB per connector_id, at most 8
// connector_ids: each is guaranteed 512 KiB, and 4 MiB are kept for those
// floors.
func fairnessServer(t *testing.T, mod func(*ServerConfig)) (*Server, string, *recTarget) {
	target := newRecTarget()
	srv, url := startServer(t, func(c *ServerConfig) {
		c.APIKey = attackKey
		c.NewTarget = func(string) imv2.Target { return target }
		c.MaxMemory = 8 << 20
		c.MaxConnectorMemory = 2 << 20
		c.MaxConnectors = 8
		if mod != nil {
			mod(c)
		}
	})
	return srv, url, target
}

// fill has 5 connector_ids (2 MiB each, 10 MiB together) flood delta
// streams until the Server budget refuses them, then top it off with
// 1-byte streams (640 bytes of budget each), and returns the attackers.
func fill(t *testing.T, url string) []*floodPeer {
	peers := make([]*floodPeer, 5)
	ids := make([][]string, len(peers))
	for i := range peers {
		peers[i], ids[i] = newFloodPeer(t, url, 4)
	}
	flood(t, peers, ids, 24<<20)
	for i, f := range peers {
		for _, ch := range ids[i] {
			for k := range 256 {
				d, err := imv2.NewChatMessageDelta(ch, imv2.ChatMessageDelta{MessageID: "t" + strconv.Itoa(k), Sequence: 1, Text: "x"})
				require.NoError(t, err)
				f.write(d)
			}
		}
		f.sync(t)
	}
	refused := 0
	for _, f := range peers {
		refused += f.count(imv2.CodeDeltaLimitExceeded)
	}
	require.Positive(t, refused, "the attackers filled what they could")
	return peers
}

// TestAttack_PeersCannotStarveAnother: five connector_ids fill the Server
// budget with delta streams and stay connected; a victim connector_id's
// delta and final are accepted and the final shown once, from its
// guaranteed floor. Before, the attackers took the whole 8 MiB and the
// victim's delta got delta_limit_exceeded.
func TestAttack_PeersCannotStarveAnother(t *testing.T) {
	srv, url, target := fairnessServer(t, nil)
	victim := dialPeer(t, url, authHeader())
	victim.hello("")
	ch, _ := victim.open("")
	fill(t, url)
	t.Logf("attackers hold %.1f MiB of the 8 MiB budget", float64(srv.MemoryUsed())/(1<<20))
	for i := range 5 {
		id := "v" + strconv.Itoa(i)
		d, err := imv2.NewChatMessageDelta(ch, imv2.ChatMessageDelta{MessageID: id, Sequence: 1, Text: strings.Repeat("d", 1024)})
		require.NoError(t, err)
		victim.write(d)
		victim.write(finalMessage(ch, id, "the victim's final"))
		require.Equal(t, imv2.AckAccepted, mustAck(t, victim.next()).Status, "final %d (a rejected delta's error would come first)", i)
		require.Equal(t, 1, target.count(id))
	}
}

// TestAttack_DisconnectedPeersStreamsReleased: the attackers fill the
// budget and disconnect; their streams are dropped with their
// connections and the budget is free again at once. Before, the streams
// stayed until their idle TTL (5 min), however long the attackers were
// gone.
func TestAttack_DisconnectedPeersStreamsReleased(t *testing.T) {
	srv, url, _ := fairnessServer(t, nil)
	peers := fill(t, url)
	require.Positive(t, srv.MemoryUsed())
	for _, f := range peers {
		require.NoError(t, f.conn.Close())
	}
	require.Eventually(t, func() bool { return srv.MemoryUsed() == 0 }, wait, time.Millisecond,
		"streams of gone peers still hold %d bytes", srv.MemoryUsed())
}

// TestAttack_StreamHasMaxAge: a peer extends one stream by a byte every
// 4 minutes (under the 5-minute idle TTL); 30 minutes after its first
// delta (DeltaMaxAge) the stream is dropped and its budget returned, and
// the next byte is refused delta_sequence_gap. Before, the stream lived as
// long as the peer kept appending.
func TestAttack_StreamHasMaxAge(t *testing.T) {
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	srv, url, _ := fairnessServer(t, func(c *ServerConfig) {
		c.Clock = clk
		c.Conn.PingInterval = -1 // the fake clock's jumps would cut the keepalive
	})
	peer, ids := newFloodPeer(t, url, 1)
	seq := int64(0)
	appendByte := func() {
		seq++
		d, err := imv2.NewChatMessageDelta(ids[0], imv2.ChatMessageDelta{MessageID: "slow", Sequence: seq, Text: "x"})
		require.NoError(t, err)
		peer.write(d)
		peer.sync(t)
	}
	appendByte()
	held := srv.MemoryUsed()
	require.Positive(t, held)
	for range 7 { // 28 minutes
		clk.Advance(4 * time.Minute)
		appendByte()
		require.Equal(t, held, srv.MemoryUsed(), "alive under its idle TTL")
	}
	require.Zero(t, peer.count(imv2.CodeDeltaSequenceGap))
	clk.Advance(4 * time.Minute) // 32 minutes: past DeltaMaxAge
	assert.Zero(t, srv.MemoryUsed(), "the stream outlived its maximum age")
	appendByte()
	assert.Equal(t, 1, peer.count(imv2.CodeDeltaSequenceGap), "the dropped stream is not extended")
}
