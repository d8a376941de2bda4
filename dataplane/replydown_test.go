package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
)

// TestReply_D5_C8_DeltaAndActivityWhileDown pins what Reply.Delta and
// Reply.Activity do while the connection is down (package doc, "The
// outcome of a final"): each returns channel_unavailable at once, and the
// delta or snapshot is dropped, neither queued nor sent after the
// reconnect (no earlier final is pending here, whose ack would reassert
// the snapshot, C6). A later delta of the same reply leaves but the Connector
// refuses it as a gap (D4), so the draft stays what it was; the final
// still shows the whole text (D5). Broken on purpose (a Delta that
// queues, an Activity replayed on reconnect), a draft or a "tool" status
// arrives after the reconnect and this fails.
func TestReply_D5_C8_DeltaAndActivityWhileDown(t *testing.T) {
	target := &actTarget{recTarget: newRecTarget(), seen: make(chan imv2.ActivityStatus, 16)}
	srv, url := startServer(t, func(c *ServerConfig) { c.NewTarget = func(string) imv2.Target { return target } })
	c, clk, events := dialClient(t, url, nil)
	recv(t, events)
	ctx := ctxWait(t)
	ch, err := c.OpenChannel(ctx, "")
	require.NoError(t, err)
	r, err := c.NewReply(ch, "")
	require.NoError(t, err)
	require.NoError(t, r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking}))
	require.Equal(t, imv2.ActivityThinking, recv(t, target.seen))
	require.NoError(t, r.Delta(ctx, "Hel"))
	require.Equal(t, "Hel", recv(t, target.shown))

	srv.dropConnections()
	recv(t, clk.armed) // down, the reconnect waiting on the fake clock
	unavailable := &imv2.Error{Code: imv2.CodeChannelUnavailable}
	require.ErrorIs(t, r.Delta(ctx, "lo"), unavailable, "a delta while down fails at once")
	require.ErrorIs(t, r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "web_search"}), unavailable,
		"so does an activity snapshot")

	clk.Advance(c.cfg.Advanced.ReconnectMax)
	require.Equal(t, []string{ch}, recv(t, events).ids)
	require.NoError(t, r.Delta(ctx, "!"), "the next delta leaves …")
	d, err := r.Final(ctx, imv2.ChatMessage{Text: "Hello!"})
	require.NoError(t, err)
	require.Equal(t, "Hello!", target.next(t).Text, "D5: the final shows the whole text")
	status, err := d.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, status)
	require.Equal(t, []string{"Hel"}, target.draftList(), "… but the Connector refused it as a gap (D4); the dropped delta never came")
	for len(target.seen) > 0 {
		require.NotEqual(t, imv2.ActivityTool, <-target.seen, "the dropped snapshot was not sent after the reconnect")
	}
}
