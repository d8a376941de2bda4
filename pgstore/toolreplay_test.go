package pgstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/protocol"
)

// TestToolReplay_W13_RunsOnceAcrossARestart (issue 37): a Connector on
// pgstore runs a tool.invoke and answers it, then stops; a new Connector
// process on the same database gets the replay (same request_id, channel,
// tool and arguments) from the reconnected xAgent and runs nothing: the
// call's record, written to the completed store before the tool ran,
// answers it tool_invoke_failed "ran before". Before issue 37 the replay
// records lived in the Server's memory and the new process ran the tool
// again.
func TestToolReplay_W13_RunsOnceAcrossARestart(t *testing.T) {
	url := srv.NewDatabase(t)
	var runs atomic.Int32
	tools := func(c *dataplane.ServerConfig) {
		c.Tools = dataplane.ToolFunc(func(context.Context, string, protocol.ToolInvoke) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(`{"status":"sent"}`), nil
		})
	}
	ctx := context.Background()
	invoke := func(c *dataplane.Client, ch string) (*imv2.Packet, error) {
		p, err := imv2.NewPacket(protocol.TypeToolInvoke, ch, protocol.ToolInvoke{ToolID: consolebridge.ToolSend, Arguments: json.RawMessage(`{"connector_channel_id":"` + ch + `","text":"pay 10"}`)})
		if err != nil {
			t.Fatal(err)
		}
		p.RequestID = "req_pay_1"
		return c.Request(ctx, p)
	}

	a := startReplica(t, url, newKeyPlatform(false), imv2.Options{}, tools)
	x := xagent(t, a.hs.URL, imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }))
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := invoke(x, ch.ID()); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if runs.Load() != 1 {
		t.Fatalf("runs = %d", runs.Load())
	}
	_ = x.Close()
	a.stop()

	b := startReplica(t, url, newKeyPlatform(false), imv2.Options{}, tools)
	x2 := xagent(t, b.hs.URL, imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }), ch.ID())
	again, err := x2.OpenChannel(ctx, ch.ID())
	if err != nil {
		t.Fatal(err)
	}
	if again.ID() != ch.ID() {
		t.Fatalf("reopen gave %s, want %s (the shared registry knows it)", again.ID(), ch.ID())
	}
	ans, err := invoke(x2, ch.ID())
	if e := imv2.AsError(err, ""); err == nil || e.Code != protocol.CodeToolInvokeFailed || !strings.Contains(e.Message, "ran before (W13) and succeeded") {
		t.Fatalf("replay after the restart: %v %+v, want tool_invoke_failed: ran before and succeeded", err, ans)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times over the restart, want 1", n)
	}
}
