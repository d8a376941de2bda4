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
			if strings.Contains(string(req.Arguments), "refuse") {
				return nil, imv2.Errorf("target_refused", "the platform refused it")
			}
			return json.RawMessage(`{"status":"sent"}`), nil
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
// The tool does not run again: the call's durable records in the
// completed store (written before it ran, and how it ended before it was
// answered) answer the replay tool_invoke_failed "ran before and
// succeeded", and a failed call's replay with its code. Before issue 37 the replay records lived in memory
// only, and the restarted process ran the side effect a second time.
func TestAttack_ToolReplayAfterKillRunsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	child := startToolChild(t, path)
	p := dialPeer(t, child.url, nil)
	p.hello("")
	ch, _ := p.open("")
	first := p.toolAckOf(p.toolInvoke(ch, "req_1", `{"text":"pay 10"}`))
	require.Nil(t, first.Error)
	require.Equal(t, `{"text":"pay 10"}`, recv(t, child.runs))
	failed := p.toolAckOf(p.toolInvoke(ch, "req_f", `{"text":"refuse"}`))
	require.NotNil(t, failed.Error)
	require.Equal(t, imv2.Code("target_refused"), failed.Error.Code)
	require.Equal(t, `{"text":"refuse"}`, recv(t, child.runs))
	child.kill()

	child = startToolChild(t, path)
	p = dialPeer(t, child.url, nil)
	p.hello("")
	again, _ := p.open(ch)
	replay := p.toolAckOf(p.toolInvoke(again, "req_1", `{"text":"pay 10"}`))
	require.NotNil(t, replay.Error, "the replay is answered, not run")
	require.Equal(t, protocol.CodeToolInvokeFailed, replay.Error.Code)
	require.Contains(t, replay.Error.Message, "ran before (W13) and succeeded")
	// A failed call's replay keeps its code.
	replayF := p.toolAckOf(p.toolInvoke(again, "req_f", `{"text":"refuse"}`))
	require.NotNil(t, replayF.Error)
	require.Equal(t, imv2.Code("target_refused"), replayF.Error.Code)
	// Another call still runs: the record is the call's, not the channel's.
	require.Nil(t, p.toolAckOf(p.toolInvoke(again, "req_2", `{"text":"pay 5"}`)).Error)
	require.Equal(t, `{"text":"pay 5"}`, recv(t, child.runs))
	require.Empty(t, child.runs, "the replayed call ran once over both lives")
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
	require.NoError(t, readmetable.Check(rows, label, []string{readmetable.Dur(toolReplayTTL), readmetable.Count(toolReplaysPerPeer), readmetable.Count(toolReplaysTotal), readmetable.Size(toolReplayBytes)}))
}
