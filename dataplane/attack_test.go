package dataplane

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// Attacks from issue 14 replayed over real loopback WebSockets. Each one
// failed on the code before the budget (see RELIABILITY.md, "Attacks tried").

const attackKey = "attack-test-key"

func authHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + attackKey}}
}

// floodPeer is an authenticated xAgent side that writes deltas as fast as
// it can while a goroutine drains (and counts) the Connector's answers, so
// the Connector's replies never stall its read loop.
type floodPeer struct {
	*peer
	mu    sync.Mutex
	codes map[imv2.Code]int
	pong  chan struct{}
	done  chan struct{}
}

func newFloodPeer(t *testing.T, url string, channels int) (*floodPeer, []string) {
	t.Helper()
	p := dialPeer(t, url, authHeader())
	p.hello("")
	ids := make([]string, channels)
	for i := range ids {
		ids[i], _ = p.open("")
	}
	f := &floodPeer{peer: p, codes: map[imv2.Code]int{}, pong: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			pkt, err := p.conn.Read(context.Background())
			if err != nil {
				return
			}
			switch {
			case pkt.Type == protocol.TypePong:
				f.pong <- struct{}{}
			case pkt.Error != nil:
				f.mu.Lock()
				f.codes[pkt.Error.Code]++
				f.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { _ = p.conn.Close(); <-f.done })
	return f, ids
}

// sync waits until the Connector handled everything written before: its
// read loop answers the ping only after the deltas ahead of it.
func (f *floodPeer) sync(t *testing.T) {
	t.Helper()
	f.send(protocol.TypePing, "", nil)
	recv(t, f.pong)
}

func (f *floodPeer) count(c imv2.Code) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.codes[c]
}

// heapSampler records the peak of runtime.MemStats.HeapAlloc above the
// heap measured (after a collection) when it started.
type heapSampler struct {
	base, peak uint64
	stop, done chan struct{}
}

func sampleHeap() *heapSampler {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapSampler{base: ms.HeapAlloc, peak: ms.HeapAlloc, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			h.peak = max(h.peak, ms.HeapAlloc)
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// grown stops sampling and returns the peak growth in bytes.
func (h *heapSampler) grown() uint64 {
	close(h.stop)
	<-h.done
	return h.peak - h.base
}

// heapSlack is what the heap may hold beyond a budget (DefaultMaxMemory
// documents it): the budget once for the buffers a growing stream
// replaced (doubling: their sum stays under the live capacity), once more
// because GOGC=100 lets garbage grow to the live heap before a collection,
// plus 24 MiB for frames in flight, the runtime and the test's own peers.
func heapSlack(budget int64) uint64 { return 2*uint64(budget) + 24<<20 }

// flood writes total bytes of delta text, in 32 KiB deltas, round robin
// over every peer's channels: each message gets 16 deltas (512 KiB, under
// the per-stream bound), then the next message_id starts.
func flood(t *testing.T, peers []*floodPeer, ids [][]string, total int) {
	t.Helper()
	piece := strings.Repeat("x", 32<<10)
	sent := 0
	for k := 0; sent < total; k++ {
		for i, f := range peers {
			for _, ch := range ids[i] {
				pkt, err := imv2.NewChatMessageDelta(ch, imv2.ChatMessageDelta{
					MessageID: "m" + strconv.Itoa(k/16),
					Sequence:  int64(k%16 + 1),
					Text:      piece,
				})
				require.NoError(t, err)
				f.write(pkt)
				sent += len(piece)
			}
		}
	}
	for _, f := range peers {
		f.sync(t)
	}
}

// TestAttack_DeltaFloodStaysInBudget: one peer with the API key floods
// open delta streams — across 4 channels, and across 4 connector_ids × 50
// channels — and the Connector's heap stays under its budget plus the
// documented slack; what does not fit is rejected delta_limit_exceeded.
// Before the budget, every byte was held (4 channels × 256 streams × 1 MiB
// could be) and the peak grew with the flood.
func TestAttack_DeltaFloodStaysInBudget(t *testing.T) {
	cases := []struct {
		name                 string
		peers, channels      int
		server, perConnector int64
		total                int
	}{
		{name: "4 channels", peers: 1, channels: 4, server: 16 << 20, perConnector: 8 << 20, total: 64 << 20},
		{name: "4 connector_ids x 50 channels", peers: 4, channels: 50, server: 8 << 20, perConnector: 4 << 20, total: 48 << 20},
		{name: "4 channels, default budgets", peers: 1, channels: 4, total: 96 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := startServer(t, func(c *ServerConfig) {
				c.APIKey = attackKey
				c.NewTarget = func(string) imv2.Target { return discardTarget{} }
				c.MaxMemory = tc.server
				c.MaxConnectorMemory = tc.perConnector
			})
			binding := min(orDefault64(tc.server, DefaultMaxMemory), int64(tc.peers)*orDefault64(tc.perConnector, DefaultMaxConnectorMemory))
			peers := make([]*floodPeer, tc.peers)
			ids := make([][]string, tc.peers)
			for i := range peers {
				peers[i], ids[i] = newFloodPeer(t, url, tc.channels)
			}
			heap := sampleHeap()
			flood(t, peers, ids, tc.total)
			grown := heap.grown()
			refused := 0
			for _, f := range peers {
				refused += f.count(imv2.CodeDeltaLimitExceeded)
			}
			t.Logf("flood of %d MiB: peak heap +%.1f MiB (budget %d MiB, bound %.0f MiB), budget used %.1f MiB, %d deltas refused delta_limit_exceeded",
				tc.total>>20, float64(grown)/(1<<20), binding>>20, float64(uint64(binding)+heapSlack(binding))/(1<<20), float64(srv.MemoryUsed())/(1<<20), refused)
			require.LessOrEqual(t, grown, uint64(binding)+heapSlack(binding), "peak heap growth within budget + slack")
			require.LessOrEqual(t, srv.MemoryUsed(), binding, "the budget is never passed")
			require.Positive(t, refused, "what does not fit is refused")
		})
	}
}

// discardTarget shows drafts (UpdateDraft) and finals and
// keeps nothing, as a platform's post and edit calls do.
type discardTarget struct{}

func (discardTarget) PostMessage(context.Context, string, *imv2.ChatMessage) error { return nil }

func (discardTarget) UpdateDraft(context.Context, string, string, string) error { return nil }

func orDefault64(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// TestAttack_EvictionDuringGraceKeepsFinalsOnce: a client whose final was
// posted loses the ack with its connection; while it is offline 64
// attackers each hold a connector_id online. The 64th gets in (issue 37):
// the offline client, with nothing pending, gives way. Its completed
// record stays (Channel.Drop keeps them), so when it returns — under a
// new connector_id, its reopen answered with a new channel ID — the
// resend of its final is answered duplicate and shown once. (Before
// issue 37 the 64th attacker was refused and the client kept its slot.)
func TestAttack_EvictionDuringGraceKeepsFinalsOnce(t *testing.T) {
	target := newRecTarget()
	srv, url := startServer(t, func(c *ServerConfig) {
		c.APIKey = attackKey
		c.NewTarget = func(string) imv2.Target { return target }
	})
	client := dialPeer(t, url, authHeader())
	connID := client.hello("")
	ch, _ := client.open("")
	final := finalMessage(ch, "a1", "shown once")
	client.write(final)
	require.Equal(t, "a1", target.next(t).MessageID)
	require.NoError(t, client.conn.Close()) // the ack is lost with the connection
	waitDetached(t, srv, connID)

	var attackers []*peer
	for range DefaultMaxConnectors {
		a := dialPeer(t, url, authHeader())
		attackers = append(attackers, a)
		ans := a.call(protocol.TypeConnectorHello, "", goodHello(""))
		require.Equal(t, protocol.TypeConnectorHelloAck, ans.Type, "a newcomer gets in: %+v", ans.Error)
	}
	for _, a := range attackers { // the attacker lets go; the client returns
		require.NoError(t, a.conn.Close())
	}
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.sessions) == 0
	}, wait, time.Millisecond)

	back := dialPeer(t, url, authHeader())
	assert.NotEqual(t, connID, back.hello(connID), "the offline connector_id gave way")
	again, _ := back.open(ch)
	back.write(finalMessage(again, "a1", "shown once")) // the resend, on whatever ID the open returned
	assert.Equal(t, imv2.AckDuplicate, mustAck(t, back.next()).Status)
	require.Equal(t, 1, target.count("a1"), "shown once")
}

// waitDetached waits until connector_id id has no live connection.
func waitDetached(t *testing.T, srv *Server, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		inst := srv.instances[id]
		return inst != nil && inst.live == 0
	}, wait, time.Millisecond)
}

// TestAttack_CompletedRecordsFollowANewChannelID: the Connector restarts
// with its completed store but without its channel registry, so a reopen
// of the old channel ID gets a new one; the sender resends a final the old
// channel had completed on the new ID, and it is answered duplicate. Before
// CompletedStore.Handover, the records stayed with the old ID and the
// final was posted twice.
func TestAttack_CompletedRecordsFollowANewChannelID(t *testing.T) {
	completed := imv2.NewMemoryCompletedStore(0, 0, nil)
	target := newRecTarget()
	mod := func(c *ServerConfig) {
		c.APIKey = attackKey
		c.NewTarget = func(string) imv2.Target { return target }
		c.Options = &imv2.Options{Completed: completed}
	}
	_, url := startServer(t, mod)
	first := dialPeer(t, url, authHeader())
	first.hello("")
	old, _ := first.open("")
	p := finalMessage(old, "a1", "shown once")
	first.write(p)
	require.Equal(t, imv2.AckAccepted, mustAck(t, first.next()).Status)

	_, url2 := startServer(t, mod) // the restart: same completed store, fresh registry
	second := dialPeer(t, url2, authHeader())
	second.hello("")
	id, _ := second.open(old)
	require.NotEqual(t, old, id, "W5: an unknown ID gets a new one")
	second.write(finalMessage(id, "a1", "shown once"))
	require.Equal(t, imv2.AckDuplicate, mustAck(t, second.next()).Status)
	require.Equal(t, 1, target.count("a1"), "shown once")
}

func mustAck(t *testing.T, p *imv2.Packet) *imv2.ChatMessageAck {
	t.Helper()
	a, err := imv2.DecodeChatMessageAck(p)
	require.NoError(t, err, "got %s %+v", p.Type, p.Error)
	return a
}

// TestAttack_PreHelloConnectionsCapped: past MaxPreHello connections
// without a hello the upgrade is refused with 503; a hello frees a slot.
// Before, every such connection was held (≈ 26 KB) until the hello
// deadline.
func TestAttack_PreHelloConnectionsCapped(t *testing.T) {
	const maxPre = 3
	srv, url := startServer(t, func(c *ServerConfig) {
		c.APIKey = attackKey
		c.MaxPreHello = maxPre
	})
	var idle []*peer
	for range maxPre {
		p := dialPeer(t, url, authHeader())
		require.Equal(t, protocol.TypePong, p.call(protocol.TypePing, "", nil).Type) // served, no hello
		idle = append(idle, p)
	}
	d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
	ws, resp, err := d.Dial(url, authHeader())
	if ws != nil {
		_ = ws.Close()
	}
	require.ErrorIs(t, err, websocket.ErrBadHandshake, "connection past the cap accepted")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_ = resp.Body.Close()
	a, b := NewPipe() // ServeConn past the cap closes the connection at once
	require.ErrorIs(t, srv.ServeConn(context.Background(), b), imv2.ErrClosed)
	_, err = a.Read(ctxWait(t))
	require.Error(t, err, "closed")

	idle[0].hello("") // a hello frees its slot
	more := dialPeer(t, url, authHeader())
	more.hello("")
	require.NoError(t, idle[1].conn.Close()) // so does a connection that ends
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.preHello == maxPre-2
	}, wait, time.Millisecond)
	dialPeer(t, url, authHeader())
}

// TestAttack_EmptyHellosDoNotLockOutNewConnectorIDs: one key-holder sends
// DefaultMaxConnectors hellos with an empty connector_id and drops the
// connections, opening no channel. A new connector_id is then admitted
// (the least recently seen empty instance is evicted) while an offline
// client holding a channel keeps its connector_id. Before, every empty
// instance kept its hour of grace and the new hello was refused
// connector_id_mismatch.
func TestAttack_EmptyHellosDoNotLockOutNewConnectorIDs(t *testing.T) {
	srv, url := startServer(t, func(c *ServerConfig) { c.APIKey = attackKey })
	client := dialPeer(t, url, authHeader())
	clientID := client.hello("")
	client.open("")
	require.NoError(t, client.conn.Close())
	waitDetached(t, srv, clientID)

	var first string
	for i := range DefaultMaxConnectors - 1 {
		a := dialPeer(t, url, authHeader())
		id := a.hello("")
		if i == 0 {
			first = id
		}
		require.NoError(t, a.conn.Close())
		waitDetached(t, srv, id)
	}
	fresh := dialPeer(t, url, authHeader())
	ans := fresh.call(protocol.TypeConnectorHello, "", goodHello(""))
	require.NotEqual(t, imv2.TypeError, ans.Type, "a new connector_id is admitted at the cap")
	srv.mu.Lock()
	defer srv.mu.Unlock()
	assert.Len(t, srv.instances, DefaultMaxConnectors)
	assert.Contains(t, srv.instances, clientID, "the offline instance with a channel keeps its grace")
	assert.NotContains(t, srv.instances, first, "the least recently seen empty instance was evicted")
}
