package display_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
	"github.com/xagentkit/imv2/imv2test"
)

// Wired into a real Connector Channel, an xAgent reply with deltas shows as
// one temporary message finished to the final's text, and a final without
// deltas as one send (D8, M11, M13).
func TestChannel_D8_M11_M13_ThroughChannel(t *testing.T) {
	ctx := context.Background()
	posts, finals := make(chan call, 4), make(chan call, 4)
	tg, r, _ := newTarget(t, caps{mode: display.Edit, typing: true}, display.Options{})
	r.onCall = func(c call) {
		switch c.Op {
		case "post":
			posts <- c
		case "send", "finish":
			finals <- c
		}
	}
	require.Equal(t, display.Edit, tg.Mode())

	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	a, b := imv2test.NewInMemoryTransports()
	conn, err := imv2.NewChannel("cch_1", imv2.RoleConnector, neg, a, tg, nil)
	require.NoError(t, err)
	agent, err := imv2.NewChannel("cch_1", imv2.RoleXAgent, neg, b,
		imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }), nil)
	require.NoError(t, err)
	a.Attach(conn) // conn gets what b sends, and the other way round
	b.Attach(agent)
	defer func() {
		require.NoError(t, agent.Close())
		require.NoError(t, conn.Close())
		require.NoError(t, a.Close())
	}()

	require.NoError(t, agent.SendActivity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking}))
	reply := agent.NewReply("")
	require.NoError(t, reply.Delta(ctx, "Hel"))
	require.NoError(t, reply.Delta(ctx, "lo"))
	// Wait for the draft: a final that overtakes it is shown alone, which
	// is right but not what this test is about.
	p := waitCall(t, posts)
	require.Equal(t, reply.MessageID(), p.MessageID)
	require.NoError(t, reply.Final(ctx, imv2.ChatMessage{Text: "Hello, world."}))
	f := waitCall(t, finals)
	require.Equal(t, "finish", f.Op)
	require.Equal(t, "Hello, world.", f.Text)
	require.Equal(t, reply.MessageID(), f.MessageID)
	require.Equal(t, p.Handle, f.Handle)
	require.Equal(t, 1, r.count("post"))

	require.NoError(t, agent.NewReply("").Final(ctx, imv2.ChatMessage{Text: "No deltas."}))
	f = waitCall(t, finals)
	require.Equal(t, "send", f.Op)
	require.Equal(t, "No deltas.", f.Text)
	require.Equal(t, 1, r.count("post"))
}

func waitCall(t *testing.T, calls <-chan call) call {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the platform got no call")
		return call{}
	}
}
