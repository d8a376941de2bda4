package dataplane

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// toolInvoke writes a tool.invoke of test_send with requestID and args.
func (p *peer) toolInvoke(channel, requestID, args string) *imv2.Packet {
	p.t.Helper()
	pkt, err := imv2.NewPacket(protocol.TypeToolInvoke, channel, protocol.ToolInvoke{ToolID: "test_send", Arguments: json.RawMessage(args)})
	require.NoError(p.t, err)
	pkt.RequestID = requestID
	p.write(pkt)
	return pkt
}

// toolAckOf reads the next packet and checks it is the tool.invoke.ack
// answering req (W9).
func (p *peer) toolAckOf(req *imv2.Packet) *imv2.Packet {
	p.t.Helper()
	ack := p.next()
	require.Equal(p.t, protocol.TypeToolInvokeAck, ack.Type)
	require.Equal(p.t, req.PacketID, ack.ReplyTo, "W9: the replay's own reply_to")
	require.Equal(p.t, req.RequestID, ack.RequestID)
	return ack
}

// TestTool_W13_ReplayGetsSameAnswerRunsNothing: over a real WebSocket, a
// tool.invoke sent again with the same request_id (and call) is answered
// with the first answer, reply_to naming the replay, and the handler runs
// once: on the same connection, after a reconnect under the same
// connector_id, and for a failed call. Another request_id runs again (the
// TTL is TestToolReplays_W13_Bounds's). Before, every replay ran the tool
// (a message posted once per replay).
func TestTool_W13_ReplayGetsSameAnswerRunsNothing(t *testing.T) {
	var runs atomic.Int32
	_, url := startServer(t, func(c *ServerConfig) {
		c.Tools = ToolFunc(func(_ context.Context, _ string, req protocol.ToolInvoke) (json.RawMessage, error) {
			n := runs.Add(1)
			if string(req.Arguments) == `{"fail":true}` {
				return nil, imv2.Errorf(protocol.CodeToolInvokeFailed, "refused by the platform")
			}
			return json.RawMessage(`{"status":"sent","run":` + string(rune('0'+n)) + `}`), nil
		})
	})
	p := dialPeer(t, url, nil)
	cid := p.hello("")
	ch, _ := p.open("")

	first := p.toolInvoke(ch, "req_1", `{"text":"hi"}`)
	a1 := p.toolAckOf(first)
	require.Nil(t, a1.Error)
	replay := p.toolInvoke(ch, "req_1", `{"text":"hi"}`)
	a2 := p.toolAckOf(replay)
	require.JSONEq(t, string(a1.Payload), string(a2.Payload), "W13: the same answer")
	require.EqualValues(t, 1, runs.Load(), "W13: a replay runs nothing")

	// A failed call's replay gets the same failure.
	f1 := p.toolAckOf(p.toolInvoke(ch, "req_fail", `{"fail":true}`))
	require.NotNil(t, f1.Error)
	f2 := p.toolAckOf(p.toolInvoke(ch, "req_fail", `{"fail":true}`))
	require.Equal(t, f1.Error, f2.Error)
	require.EqualValues(t, 2, runs.Load())

	// Another request_id is another call.
	p.toolAckOf(p.toolInvoke(ch, "req_2", `{"text":"hi"}`))
	require.EqualValues(t, 3, runs.Load())

	// A reconnecting xAgent replays the call on a new connection.
	require.NoError(t, p.ws.Close())
	p2 := dialPeer(t, url, nil)
	require.Equal(t, cid, p2.hello(cid))
	ch2, _ := p2.open(ch)
	require.Equal(t, ch, ch2)
	a3 := p2.toolAckOf(p2.toolInvoke(ch, "req_1", `{"text":"hi"}`))
	require.JSONEq(t, string(a1.Payload), string(a3.Payload))
	require.EqualValues(t, 3, runs.Load(), "W13: a replay after a reconnect runs nothing")
}

// TestTool_W13_ReplayWhileRunningWaitsForTheAnswer: a replay that arrives
// while the first call still runs waits for it and gets its answer; the
// handler runs once.
func TestTool_W13_ReplayWhileRunningWaitsForTheAnswer(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}, 2), make(chan struct{})
	_, url := startServer(t, func(c *ServerConfig) {
		c.Tools = ToolFunc(func(ctx context.Context, _ string, _ protocol.ToolInvoke) (json.RawMessage, error) {
			runs.Add(1)
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return json.RawMessage(`{"status":"sent"}`), nil
		})
	})
	p := dialPeer(t, url, nil)
	p.hello("")
	ch, _ := p.open("")
	first := p.toolInvoke(ch, "req_1", `{}`)
	recv(t, started)
	replay := p.toolInvoke(ch, "req_1", `{}`)
	pong := p.call("ping", "", nil) // the replay was read and is waiting
	require.Equal(t, "pong", pong.Type)
	close(release)
	acks := map[string]*imv2.Packet{}
	for range 2 {
		a := p.next()
		acks[a.ReplyTo] = a
	}
	require.Contains(t, acks, first.PacketID)
	require.Contains(t, acks, replay.PacketID)
	require.JSONEq(t, string(acks[first.PacketID].Payload), string(acks[replay.PacketID].Payload))
	require.EqualValues(t, 1, runs.Load())
}

// TestToolReplays_W13_Bounds: the record keeps at most toolReplaysPerPeer
// calls per connector_id and toolReplaysTotal per Server, the oldest going
// first, and forgets a call toolReplayTTL after it began.
func TestToolReplays_W13_Bounds(t *testing.T) {
	clk := fakeclock.New(t0)
	r := newToolReplays(clk)
	sum := callSum("t", nil)
	run := func(peer, ch, req string) bool {
		c, first := r.begin(peer, ch, req, sum)
		if first {
			r.finish(c, toolAnswer{toolID: "t"})
		}
		return first
	}
	for i := range toolReplaysPerPeer + 1 {
		require.True(t, run("peer_a", "ch_a", "req_"+strconv.Itoa(i)))
	}
	require.Equal(t, toolReplaysPerPeer, r.len(), "per peer")
	require.True(t, run("peer_a", "ch_a", "req_0"), "the oldest of the peer went first")
	require.False(t, run("peer_a", "ch_a", "req_"+strconv.Itoa(toolReplaysPerPeer)), "the newest is kept")

	for i := range toolReplaysTotal {
		run("peer_"+strconv.Itoa(i%64), "ch_"+strconv.Itoa(i%64), "req_t"+strconv.Itoa(i))
	}
	require.LessOrEqual(t, r.len(), toolReplaysTotal, "in total")

	clk.Advance(toolReplayTTL)
	require.True(t, run("peer_x", "ch_x", "req_new"))
	require.Equal(t, 1, r.len(), "every call older than the TTL is gone")

	c, first := r.begin("peer_x", "ch_x", "", sum)
	require.True(t, first)
	require.Nil(t, c, "no request_id: not recorded")
	c, first = r.begin("peer_x", "ch_x", "req_new", callSum("other", nil))
	require.True(t, first)
	require.Nil(t, c, "a request_id reused for another call runs, unrecorded")
}

// TestToolReplays_W13_FloodEvictsTheFloodersOwn: with the record full, a
// new call evicts the oldest call of the peer holding the most, so a
// victim's single call outlives 17 peers × toolReplaysPerPeer calls
// (before issue 37 the oldest call went, whoever held it).
func TestToolReplays_W13_FloodEvictsTheFloodersOwn(t *testing.T) {
	r := newToolReplays(fakeclock.New(t0))
	sum := callSum("t", nil)
	c, first := r.begin("victim", "ch_v", "req_v", sum)
	require.True(t, first)
	r.finish(c, toolAnswer{toolID: "t"})
	for i := range 17 {
		for j := range toolReplaysPerPeer {
			c, _ := r.begin("peer_"+strconv.Itoa(i), "ch_"+strconv.Itoa(i), "req_"+strconv.Itoa(j), sum)
			r.finish(c, toolAnswer{toolID: "t"})
		}
	}
	require.Equal(t, toolReplaysTotal, r.len())
	_, first = r.begin("victim", "ch_v", "req_v", sum)
	require.False(t, first, "the victim's answer is kept")
}

// TestToolReplays_W13_DurableRecordsSayHowTheCallEnded: the first
// toolRan of a call writes its record and reports it new, the next
// reports it ran; a replay's answer then says the end is unknown until
// toolDone wrote it, then is the success's result (kept: the default
// store is an state.ResultStore), tool_invoke_failed saying it succeeded
// for a result over state.MaxResultBytes, or the failure's own code. A
// request_id reused for another call is not "ran".
func TestToolReplays_W13_DurableRecordsSayHowTheCallEnded(t *testing.T) {
	srv, _ := startServer(t, nil)
	ctx := context.Background()
	sum := callSum("t", json.RawMessage(`{}`))
	ran, err := srv.toolRan(ctx, "peer", "ch_1", "req_1", sum)
	require.NoError(t, err)
	require.False(t, ran)
	ran, err = srv.toolRan(ctx, "peer", "ch_1", "req_1", sum)
	require.NoError(t, err)
	require.True(t, ran)
	ran, err = srv.toolRan(ctx, "peer", "ch_1", "req_1", callSum("other", nil))
	require.NoError(t, err)
	require.False(t, ran, "another call under a reused request_id")
	ranBefore := func(req string) (json.RawMessage, *imv2.Error) {
		res, err := srv.toolRanBefore(ctx, "peer", "ch_1", req, "t")
		if err == nil {
			return res, nil
		}
		var e *imv2.Error
		require.ErrorAs(t, err, &e)
		return res, e
	}

	_, e := ranBefore("req_1")
	require.Contains(t, e.Message, "unknown")
	require.NoError(t, srv.toolDone(ctx, "peer", "ch_1", "req_1", toolAnswer{toolID: "t", result: json.RawMessage(`{"sent":"m_1"}`)}))
	res, e := ranBefore("req_1")
	require.Nil(t, e)
	require.Equal(t, `{"sent":"m_1"}`, string(res), "the kept result")

	big := json.RawMessage(`"` + strings.Repeat("r", state.MaxResultBytes-1) + `"`) // one byte over
	_, err = srv.toolRan(ctx, "peer", "ch_1", "req_big", sum)
	require.NoError(t, err)
	require.NoError(t, srv.toolDone(ctx, "peer", "ch_1", "req_big", toolAnswer{toolID: "t", result: big}))
	_, e = ranBefore("req_big")
	require.Equal(t, protocol.CodeToolInvokeFailed, e.Code)
	require.Contains(t, e.Message, "succeeded; its result was not kept")

	_, err = srv.toolRan(ctx, "peer", "ch_1", "req_2", sum)
	require.NoError(t, err)
	require.NoError(t, srv.toolDone(ctx, "peer", "ch_1", "req_2", toolAnswer{toolID: "t", err: &imv2.PacketError{Code: "target_refused", Message: "no"}}))
	_, e = ranBefore("req_2")
	require.Equal(t, imv2.Code("target_refused"), e.Code)

	long := imv2.Code(strings.Repeat("c", 31)) // over what a record holds: not cut
	_, err = srv.toolRan(ctx, "peer", "ch_1", "req_3", sum)
	require.NoError(t, err)
	require.NoError(t, srv.toolDone(ctx, "peer", "ch_1", "req_3", toolAnswer{toolID: "t", err: &imv2.PacketError{Code: long, Message: "no"}}))
	_, e = ranBefore("req_3")
	require.Equal(t, protocol.CodeToolInvokeFailed, e.Code)
	require.Contains(t, e.Message, "and failed;")
}
