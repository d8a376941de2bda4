package dataplane

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/internal/readmetable"
	"github.com/xagentkit/imv2/internal/toolreplaytest"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

func init() {
	// A child of TestAttack_ToolReplayAfterKillRunsOnce: a Server on the
	// boltstore file named (its pending, completed and channel stores).
	toolreplaytest.ChildMain(func(path string, tool toolreplaytest.Tool) (http.Handler, error) {
		st, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			return nil, err
		}
		srv, err := NewServer(ServerConfig{
			Card:      testCard(),
			NewTarget: func(string) imv2.Target { return discardTarget{} },
			Registry:  st,
			Options:   &imv2.Options{Pending: st.Pending(), Completed: st.Completed()},
			Tools:     ToolFunc(tool),
		})
		if err != nil {
			return nil, err
		}
		return withCard(testCard(), srv), nil
	})
}

// TestAttack_ToolReplayAfterKillRunsOnce (issue 37, W13): a Connector
// process on a boltstore file answers tool calls, is killed with SIGKILL
// and restarted on the same file; xAgent reconnects and replays the
// calls, and none runs again (toolreplaytest.Run says how each replay is
// answered). Here xAgent is a raw WebSocket peer that checks each ack's
// reply_to and request_id (W9).
func TestAttack_ToolReplayAfterKillRunsOnce(t *testing.T) {
	toolreplaytest.Run(t, filepath.Join(t.TempDir(), "state.db"), func(t *testing.T, url, channel string) (string, toolreplaytest.Call) {
		p := dialPeer(t, strings.Replace(url, "http://", "ws://", 1)+"/ws", nil)
		p.hello("")
		ch, _ := p.open(channel)
		return ch, func(requestID, text string) (json.RawMessage, error) {
			args, _ := json.Marshal(map[string]string{"text": text})
			ack := p.toolAckOf(p.toolInvoke(ch, requestID, string(args)))
			if ack.Error != nil {
				return nil, &imv2.Error{Code: ack.Error.Code, Message: ack.Error.Message}
			}
			return ack.Payload, nil
		}
	})
}

// TestAttack_ToolReplayUnderAnotherPeersFloodRunsOnce (issue 37, W13): a
// victim's call is answered; 17 other connector_ids then make 256 calls
// each (4,352, over the 4,096 answers kept); the victim's replay gets its
// first answer and the tool does not run again. Before issue 37 the
// answers went oldest first whoever held them, so the victim's was pushed
// out and its replay ran the tool a second time.
func TestAttack_ToolReplayUnderAnotherPeersFloodRunsOnce(t *testing.T) {
	var runs sync32
	_, url := startServer(t, func(c *ServerConfig) {
		c.MaxConnectors = 32
		c.Tools = ToolFunc(func(_ context.Context, _ string, req protocol.ToolInvoke) (json.RawMessage, error) {
			runs.add(string(req.Arguments))
			return json.RawMessage(`{"status":"sent"}`), nil
		})
	})
	victim := dialPeer(t, url, nil)
	victim.hello("")
	vch, _ := victim.open("")
	a1 := victim.toolAckOf(victim.toolInvoke(vch, "req_v", `{"victim":true}`))
	require.Nil(t, a1.Error)

	const peers, calls = 17, toolReplaysPerPeer
	for i := range peers {
		a := dialPeer(t, url, nil)
		a.hello("")
		ach, _ := a.open("")
		for j := range calls {
			id := "req_" + strconv.Itoa(j)
			a.write(mustToolInvoke(t, ach, id, `{"flood":`+strconv.Itoa(i*calls+j)+`}`))
		}
		for range calls {
			require.Equal(t, protocol.TypeToolInvokeAck, a.next().Type)
		}
		require.NoError(t, a.conn.Close())
	}
	require.EqualValues(t, 1+peers*calls, runs.n.Load())

	a2 := victim.toolAckOf(victim.toolInvoke(vch, "req_v", `{"victim":true}`))
	require.Nil(t, a2.Error)
	require.JSONEq(t, string(a1.Payload), string(a2.Payload), "the first answer")
	require.EqualValues(t, 1+peers*calls, runs.n.Load(), "the victim's replay ran nothing")
}

// sync32 counts tool runs.
type sync32 struct{ n atomic.Int32 }

func (s *sync32) add(string) { s.n.Add(1) }

func mustToolInvoke(t *testing.T, channel, requestID, args string) *imv2.Packet {
	t.Helper()
	pkt, err := imv2.NewPacket(protocol.TypeToolInvoke, channel, protocol.ToolInvoke{ToolID: "test_send", Arguments: json.RawMessage(args)})
	require.NoError(t, err)
	pkt.RequestID = requestID
	return pkt
}

// TestREADME_ToolReplayRow: the README's limits row on tool-call replay
// answers gives the constants of toolreplay.go.
func TestREADME_ToolReplayRow(t *testing.T) {
	rows, err := readmetable.Rows("../README.md")
	require.NoError(t, err)
	const label = "tool-call replay answers"
	require.Equal(t, "dataplane", readmetable.Elsewhere[label])
	require.NoError(t, readmetable.Check(rows, label, []string{readmetable.Dur(toolReplayTTL), readmetable.Count(toolReplaysPerPeer), readmetable.Count(toolReplaysTotal), readmetable.Size(toolReplayBytes), readmetable.Size(state.MaxResultBytes)}))
}

// TestAttack_ToolReplayResultOutlivesAnotherPeersFlood (W13): on a
// boltstore of 40 records, a victim connector_id's call is answered;
// another connector_id then makes 60 calls over 5 channels (120 records,
// three times the cap); the store is closed and a new Server opened on
// it (the answers in memory gone). The victim's replay gets its first
// answer's payload byte for byte and the tool does not run: its records
// and result are within its connector_id's share, so the flood evicted
// the flooder's own.
func TestAttack_ToolReplayResultOutlivesAnotherPeersFlood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	var runs atomic.Int32
	serve := func() (*boltstore.Store, string) {
		st, err := boltstore.Open(path, boltstore.Options{CompletedCap: 40})
		require.NoError(t, err)
		_, url := startServer(t, func(c *ServerConfig) {
			c.Registry = st
			c.Options = &imv2.Options{Pending: st.Pending(), Completed: st.Completed()}
			c.Tools = ToolFunc(func(_ context.Context, _ string, req protocol.ToolInvoke) (json.RawMessage, error) {
				runs.Add(1)
				return json.RawMessage(`{"sent":` + string(req.Arguments) + `}`), nil
			})
		})
		return st, url
	}
	st, url := serve()
	victim := dialPeer(t, url, nil)
	victim.hello("")
	vch, _ := victim.open("")
	first := victim.toolAckOf(victim.toolInvoke(vch, "req_v", `{"text":"pay 10"}`))
	require.Nil(t, first.Error)

	attacker := dialPeer(t, url, nil)
	attacker.hello("")
	var chans []string
	for range 5 {
		ch, _ := attacker.open("")
		chans = append(chans, ch)
	}
	for i := range 60 {
		require.Nil(t, attacker.toolAckOf(attacker.toolInvoke(chans[i%5], "req_"+strconv.Itoa(i), `{"n":`+strconv.Itoa(i)+`}`)).Error)
	}
	require.EqualValues(t, 61, runs.Load())
	require.NoError(t, victim.conn.Close())
	require.NoError(t, attacker.conn.Close())
	require.NoError(t, st.Close())

	_, url = serve()
	victim = dialPeer(t, url, nil)
	victim.hello("")
	again, _ := victim.open(vch)
	require.Equal(t, vch, again, "the store's registry knows the channel")
	replay := victim.toolAckOf(victim.toolInvoke(again, "req_v", `{"text":"pay 10"}`))
	require.Nil(t, replay.Error, "the replay after the flood and a restart gets the first answer")
	require.Equal(t, string(first.Payload), string(replay.Payload))
	require.EqualValues(t, 61, runs.Load(), "the victim's call ran once")
}
