package dataplane

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/internal/readmetable"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// toolKillChildEnv names the boltstore file a child of
// TestAttack_ToolReplayAfterKillRunsOnce serves its Connector on.
const toolKillChildEnv = "DATAPLANE_TOOL_KILL_CHILD"

func init() {
	if path := os.Getenv(toolKillChildEnv); path != "" {
		os.Exit(toolKillChild(path))
	}
}

// toolKillChild is the child: a Server on the boltstore file at path (its
// pending, completed and channel stores), serving a loopback address it
// prints ("listening ADDR"), whose tool prints "run ARGS" each time it
// runs, one write(2) a line, until it is killed.
func toolKillChild(path string) int {
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	srv, err := NewServer(ServerConfig{
		Card:      testCard(),
		NewTarget: func(string) imv2.Target { return discardTarget{} },
		Registry:  st,
		Options:   &imv2.Options{Pending: st.Pending(), Completed: st.Completed()},
		Tools: ToolFunc(func(_ context.Context, _ string, req protocol.ToolInvoke) (json.RawMessage, error) {
			_, _ = fmt.Fprintf(os.Stdout, "run %s\n", req.Arguments)
			switch args := string(req.Arguments); {
			case strings.Contains(args, "refuse"):
				return nil, imv2.Errorf("target_refused", "the platform refused it")
			case strings.Contains(args, "big"): // one byte over what is kept
				return json.RawMessage(`"` + strings.Repeat("b", state.MaxResultBytes-1) + `"`), nil
			}
			return json.RawMessage(`{"status":"sent","n":"` + string(req.Arguments[len(req.Arguments)-4:len(req.Arguments)-2]) + `"}`), nil
		}),
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Printf("listening %s\n", ln.Addr())
	_ = http.Serve(ln, withCard(testCard(), srv))
	return 0
}

// toolChild is a running child: its ws URL and the count of its runs.
type toolChild struct {
	cmd  *exec.Cmd
	url  string
	runs chan string
}

func startToolChild(t *testing.T, path string) *toolChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), toolKillChildEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &toolChild{cmd: cmd, runs: make(chan string, 64)}
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			l := lines.Text()
			switch {
			case strings.HasPrefix(l, "listening "):
				addr <- strings.TrimPrefix(l, "listening ")
			case strings.HasPrefix(l, "run "):
				c.runs <- strings.TrimPrefix(l, "run ")
			default:
				t.Errorf("child: %s", l)
			}
		}
	}()
	c.url = "ws://" + recv(t, addr) + "/ws"
	t.Cleanup(func() { c.kill() })
	return c
}

// kill ends the child with SIGKILL and waits for it.
func (c *toolChild) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

// TestAttack_ToolReplayAfterKillRunsOnce (issue 37, W13): a Connector
// process on a boltstore file runs a tool.invoke and answers it; it is
// killed with SIGKILL and restarted on the same file; xAgent reconnects
// and replays the call (same request_id, channel, tool and arguments).
// The tool does not run again, and the replay gets the first answer's
// payload byte for byte: the call's durable records in the completed
// store (written before it ran, and how it ended with its result before
// it was answered). A failed call's replay gets its code; a call whose
// result is over state.MaxResultBytes (not kept) tool_invoke_failed "ran
// before and succeeded". Before issue 37 the replay records lived in
// memory only, and the restarted process ran the side effect a second
// time; before its result was kept the success's replay was answered
// tool_invoke_failed.
func TestAttack_ToolReplayAfterKillRunsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	child := startToolChild(t, path)
	p := dialPeer(t, child.url, nil)
	p.hello("")
	ch, _ := p.open("")
	first := p.toolAckOf(p.toolInvoke(ch, "req_1", `{"text":"pay 10"}`))
	require.Nil(t, first.Error)
	require.Contains(t, string(first.Payload), `{"status":"sent","n":"10"}`)
	require.Equal(t, `{"text":"pay 10"}`, recv(t, child.runs))
	failed := p.toolAckOf(p.toolInvoke(ch, "req_f", `{"text":"refuse"}`))
	require.NotNil(t, failed.Error)
	require.Equal(t, imv2.Code("target_refused"), failed.Error.Code)
	require.Equal(t, `{"text":"refuse"}`, recv(t, child.runs))
	big := p.toolAckOf(p.toolInvoke(ch, "req_big", `{"text":"big"}`))
	require.Nil(t, big.Error)
	require.Equal(t, `{"text":"big"}`, recv(t, child.runs))
	child.kill()

	child = startToolChild(t, path)
	p = dialPeer(t, child.url, nil)
	p.hello("")
	again, _ := p.open(ch)
	replay := p.toolAckOf(p.toolInvoke(again, "req_1", `{"text":"pay 10"}`))
	require.Nil(t, replay.Error, "the replay gets the first answer, not run")
	require.Equal(t, string(first.Payload), string(replay.Payload), "the same result bytes")
	// A failed call's replay keeps its code.
	replayF := p.toolAckOf(p.toolInvoke(again, "req_f", `{"text":"refuse"}`))
	require.NotNil(t, replayF.Error)
	require.Equal(t, imv2.Code("target_refused"), replayF.Error.Code)
	// A result over the bound was not kept: the replay says the call succeeded.
	replayB := p.toolAckOf(p.toolInvoke(again, "req_big", `{"text":"big"}`))
	require.NotNil(t, replayB.Error)
	require.Equal(t, protocol.CodeToolInvokeFailed, replayB.Error.Code)
	require.Contains(t, replayB.Error.Message, "ran before (W13) and succeeded; its result was not kept")
	// Another call still runs: the record is the call's, not the channel's.
	require.Nil(t, p.toolAckOf(p.toolInvoke(again, "req_2", `{"text":"pay 05"}`)).Error)
	require.Equal(t, `{"text":"pay 05"}`, recv(t, child.runs))
	require.Empty(t, child.runs, "the replayed calls ran once over both lives")
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
