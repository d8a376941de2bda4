package pgstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// envToolDB names the database a child of
// TestToolReplay_W13_RunsOnceAcrossASIGKILL serves its Connector on.
const envToolDB = "IMV2_TOOL_REPLAY_DB"

// toolChildMain is that child: a Server on pgstore at the database URL,
// serving a loopback address it prints ("listening URL"), whose tool
// prints "run ARGS" each time it runs (one write(2) a line) and answers
// with a result naming the call, or one byte over state.MaxResultBytes
// for arguments saying "big", until it is killed.
func toolChildMain() int {
	st, err := pgstore.Open(context.Background(), os.Getenv(envToolDB), pgstore.Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card: consolebridge.Card(),
		NewTarget: func(string) imv2.Target {
			return imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
		},
		Options:  &imv2.Options{Pending: st.Pending(), Completed: st.Completed()},
		Registry: st,
		Tools: dataplane.ToolFunc(func(_ context.Context, _ string, req protocol.ToolInvoke) (json.RawMessage, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Arguments, &args)
			_, _ = fmt.Fprintf(os.Stdout, "run %s\n", args.Text)
			if args.Text == "big" {
				return json.RawMessage(`"` + strings.Repeat("b", state.MaxResultBytes-1) + `"`), nil
			}
			return json.RawMessage(`{"status":"sent","for":"` + args.Text + `"}`), nil
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
	mux := http.NewServeMux()
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
	})
	mux.Handle("/ws", srv)
	fmt.Printf("listening http://%s\n", ln.Addr())
	_ = http.Serve(ln, mux)
	return 0
}

// toolChild is a running child: its base URL and its runs, in order.
type toolChild struct {
	cmd  *exec.Cmd
	url  string
	runs chan string
}

func startToolChild(t *testing.T, db string) *toolChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envToolDB+"="+db)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &toolChild{cmd: cmd, runs: make(chan string, 64)}
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
				t.Errorf("child: %s", l)
			}
		}
	}()
	select {
	case c.url = <-addr:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the child did not start")
	}
	t.Cleanup(c.kill)
	return c
}

// kill ends the child with SIGKILL and waits for it.
func (c *toolChild) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

// TestToolReplay_W13_RunsOnceAcrossASIGKILL (issue 37): a Connector
// process on pgstore runs tool calls and answers them, then is killed
// with SIGKILL; a new process on the same database gets the replays (same
// request_id, channel, tool and arguments) from the reconnected xAgent
// and runs nothing: a success's replay gets the first answer's payload
// byte for byte (its result kept in the record's row, written before the
// answer), a result over state.MaxResultBytes tool_invoke_failed "ran
// before and succeeded". Before issue 37 the new process ran the tool
// again; before the result was kept the replay was tool_invoke_failed.
func TestToolReplay_W13_RunsOnceAcrossASIGKILL(t *testing.T) {
	db := srv.NewDatabase(t)
	ctx := context.Background()
	invoke := func(c *dataplane.Client, ch, req, text string) (*imv2.Packet, error) {
		p, err := imv2.NewPacket(protocol.TypeToolInvoke, ch, protocol.ToolInvoke{ToolID: consolebridge.ToolSend, Arguments: json.RawMessage(`{"connector_channel_id":"` + ch + `","text":"` + text + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		p.RequestID = req
		return c.Request(ctx, p)
	}
	ran := func(c *toolChild, want string) {
		t.Helper()
		select {
		case got := <-c.runs:
			if got != want {
				t.Fatalf("ran %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatalf("%q did not run", want)
		}
	}
	quiet := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })

	a := startToolChild(t, db)
	x := xagent(t, a.url, quiet)
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	first, err := invoke(x, ch, "req_pay_1", "pay 10")
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	ran(a, "pay 10")
	if _, err := invoke(x, ch, "req_big", "big"); err != nil {
		t.Fatalf("big call: %v", err)
	}
	ran(a, "big")
	a.kill()
	_ = x.Close()

	b := startToolChild(t, db)
	x2 := xagent(t, b.url, quiet, ch)
	again, err := x2.OpenChannel(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if again != ch {
		t.Fatalf("reopen gave %s, want %s (the shared registry knows it)", again, ch)
	}
	replay, err := invoke(x2, ch, "req_pay_1", "pay 10")
	if err != nil {
		t.Fatalf("replay after the SIGKILL: %v, want the first answer", err)
	}
	if string(replay.Payload) != string(first.Payload) {
		t.Fatalf("replay payload %s, want the first's %s", replay.Payload, first.Payload)
	}
	_, err = invoke(x2, ch, "req_big", "big")
	if e := imv2.AsError(err, ""); err == nil || e.Code != protocol.CodeToolInvokeFailed || !strings.Contains(e.Message, "ran before (W13) and succeeded; its result was not kept") {
		t.Fatalf("replay of a result over the bound: %v, want tool_invoke_failed: ran before and succeeded", err)
	}
	if _, err := invoke(x2, ch, "req_pay_2", "pay 05"); err != nil {
		t.Fatalf("another call: %v", err)
	}
	ran(b, "pay 05")
	select {
	case r := <-b.runs:
		t.Fatalf("%q ran again after the SIGKILL", r)
	case r := <-a.runs:
		t.Fatalf("%q ran again", r)
	default:
	}
}
