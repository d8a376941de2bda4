// Package toolreplaytest is the contract, shared by the dataplane tests
// (on boltstore) and the pgstore tests (on PostgreSQL), that a tool call
// runs once across a SIGKILL of the Connector process (W13, issue 37).
//
// The Connector is a child process, the test binary started again with
// an environment variable: ChildMain turns it into a server on the store
// at a location the test names, whose tool prints "run TEXT" on stdout
// each time it runs (one write(2) a line, so a kill loses none). Run
// calls it, kills it with SIGKILL, starts a new child on the same store
// and replays the calls (same request_id, channel, tool and arguments).
//
// The package does not import dataplane: the dataplane package's own
// tests use it, so the caller builds the server (Serve) and the xAgent
// side (Dial).
package toolreplaytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// childEnv names the store location of a child; set, the test binary is
// a child (ChildMain).
const childEnv = "IMV2_TOOL_REPLAY_CHILD"

// hang bounds each wait for the child: a guard, never a measured time.
const hang = 30 * time.Second

// Tool is the child's tool, in the shape of dataplane.ToolFunc.
type Tool = func(ctx context.Context, channelID string, req protocol.ToolInvoke) (json.RawMessage, error)

// Serve builds the child's Connector on the store at where, with tool as
// its only tool: a handler serving the Card and /ws (a dataplane.Server).
type Serve func(where string, tool Tool) (http.Handler, error)

// ChildMain serves when this process is a child Run started, printing
// "listening http://ADDR" and never returning (1 on an error); otherwise
// it returns at once. Call it first in TestMain or an init.
func ChildMain(serve Serve) {
	where := os.Getenv(childEnv)
	if where == "" {
		return
	}
	h, err := serve(where, tool)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Printf("listening http://%s\n", ln.Addr())
	_ = http.Serve(ln, h)
	os.Exit(0)
}

// tool runs the call whose arguments' text is "refuse" (target_refused),
// "big" (a result one byte over state.MaxResultBytes, which is not kept)
// or anything else (a result naming it and this process), printing
// "run TEXT" first.
func tool(_ context.Context, _ string, req protocol.ToolInvoke) (json.RawMessage, error) {
	var args struct{ Text string }
	_ = json.Unmarshal(req.Arguments, &args)
	_, _ = fmt.Fprintf(os.Stdout, "run %s\n", args.Text)
	switch args.Text {
	case "refuse":
		return nil, imv2.Errorf("target_refused", "the platform refused it")
	case "big":
		return json.RawMessage(`"` + strings.Repeat("b", state.MaxResultBytes-1) + `"`), nil
	}
	// The process ID tells a replayed answer from a second run's.
	return json.RawMessage(`{"status":"sent","for":"` + args.Text + `","pid":` + strconv.Itoa(os.Getpid()) + `}`), nil
}

// Call makes one tool call: request_id requestID, arguments whose text
// is text (the caller adds what its Card's tool requires). It returns
// the tool.invoke.ack's payload, or its error as an error imv2.AsError
// reads.
type Call func(requestID, text string) (json.RawMessage, error)

// Dial connects a new xAgent to the Connector at url (http://HOST:PORT)
// and opens channel, a new one when it is empty; it returns the channel
// opened and how to call its tool. The caller closes what it opened
// (t.Cleanup).
type Dial func(t *testing.T, url, channel string) (string, Call)

// child is a running child: its base URL and its runs, in order.
type child struct {
	cmd  *exec.Cmd
	url  string
	runs chan string
}

func start(t *testing.T, where string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+where)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, runs: make(chan string, 64)}
	t.Cleanup(c.kill)
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			switch l := lines.Text(); {
			case strings.HasPrefix(l, "listening "):
				addr <- strings.TrimPrefix(l, "listening ")
			case strings.HasPrefix(l, "run "):
				c.runs <- strings.TrimPrefix(l, "run ")
			default:
				c.runs <- "unexpected line: " + l
			}
		}
	}()
	c.url = testwait.Recv(t, addr, hang)
	return c
}

// kill ends the child with SIGKILL and waits for it.
func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

// ran fails t unless the child's next run is text.
func (c *child) ran(t *testing.T, text string) {
	t.Helper()
	if got := testwait.Recv(t, c.runs, hang); got != text {
		t.Fatalf("ran %q, want %q", got, text)
	}
}

// Run is the contract. A child on the store at where answers three
// calls: a success, a refusal and a result over state.MaxResultBytes;
// it is killed with SIGKILL and a new child started on the same store;
// a new xAgent connection reopens the channel and replays the three
// calls. None runs again: the success's replay gets the first answer's
// payload byte for byte (its result kept in the store before it was
// answered), the refusal's its code, the big one tool_invoke_failed "ran
// before and succeeded". A new call still runs: the record is the
// call's, not the channel's. Before issue 37 the new process ran the
// tool again; before the result was kept the replay was
// tool_invoke_failed.
func Run(t *testing.T, where string, dial Dial) {
	t.Helper()
	wantCode := func(what string, err error, code imv2.Code, text string) {
		t.Helper()
		e := imv2.AsError(err, "")
		if err == nil || e.Code != code || !strings.Contains(e.Message, text) {
			t.Fatalf("%s: %v, want %s (%q)", what, err, code, text)
		}
	}
	a := start(t, where)
	ch, call := dial(t, a.url, "")
	first, err := call("req_pay_1", "pay 10")
	if err != nil || !strings.Contains(string(first), `{"status":"sent","for":"pay 10","pid":`) {
		t.Fatalf("first call: %s, %v", first, err)
	}
	a.ran(t, "pay 10")
	_, err = call("req_refuse", "refuse")
	wantCode("refused call", err, "target_refused", "")
	a.ran(t, "refuse")
	if _, err := call("req_big", "big"); err != nil {
		t.Fatalf("big call: %v", err)
	}
	a.ran(t, "big")
	a.kill()

	b := start(t, where)
	again, call := dial(t, b.url, ch)
	if again != ch {
		t.Fatalf("reopen gave %s, want %s (the store's registry knows it)", again, ch)
	}
	replay, err := call("req_pay_1", "pay 10")
	if err != nil {
		t.Fatalf("replay after the SIGKILL: %v, want the first answer", err)
	}
	if string(replay) != string(first) {
		t.Fatalf("replay payload %s, want the first's %s", replay, first)
	}
	_, err = call("req_refuse", "refuse")
	wantCode("replay of a refused call", err, "target_refused", "")
	_, err = call("req_big", "big")
	wantCode("replay of a result over the bound", err, protocol.CodeToolInvokeFailed, "ran before (W13) and succeeded; its result was not kept")
	if _, err := call("req_pay_2", "pay 05"); err != nil {
		t.Fatalf("another call: %v", err)
	}
	b.ran(t, "pay 05")
	select {
	case r := <-b.runs:
		t.Fatalf("%q ran again after the SIGKILL", r)
	case r := <-a.runs:
		t.Fatalf("%q ran again", r)
	default:
	}
}
