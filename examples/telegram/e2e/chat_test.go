//go:build unix

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
)

// TestChat_PrivateAndGroup_StreamedRepliesEditedAtOneASecond pairs a
// private chat and a group with two channels over the emulator, and
// answers each user message with a reply streamed in 10 deltas over about
// 3 s: the emulator has no sendMessageDraft, so the bridge chose edit
// mode; each chat ends with one bot message holding the final text, the
// agent got the user's texts in order, and no chat got more than one
// send or edit a second (the proxy's record).
func TestChat_PrivateAndGroup_StreamedRepliesEditedAtOneASecond(t *testing.T) {
	em := startEmulator(t)
	addr := freeAddr(t)
	conn := startBridge(t, em, addr, t.TempDir())
	defer conn.stop(t)
	require.Equal(t, connector.ModeEdit, conn.b.Mode(), "the emulator answers sendMessageDraft 'not supported'")
	ctx := ctxFor(t, 3*time.Minute)
	ag := startAgent(t, ctx, addr, func(ctx context.Context, r *dataplane.Reply, m imv2.ChatMessage) {
		_ = stream(ctx, r, "You wrote: "+m.Text+". "+strings.Repeat("And some more words. ", 5), 10, 300*time.Millisecond)
	})
	chats := []int64{42, -1001}
	ids := map[int64]string{}
	for _, c := range chats {
		ids[c] = ag.pair(t, ctx, em, c)
	}
	for _, c := range chats {
		em.say(t, c, fmt.Sprintf("hello from %d", c))
		em.say(t, c, "second")
	}
	require.Eventually(t, func() bool {
		s := em.shown()
		for _, c := range chats {
			if len(s[c]) != 2 || !strings.HasPrefix(s[c][1].Text, "You wrote: second") || !strings.HasSuffix(s[c][1].Text, "more words. ") {
				return false
			}
		}
		return true
	}, 2*time.Minute, 100*time.Millisecond)
	for _, c := range chats {
		s := em.shown()[c]
		require.Equal(t, "You wrote: hello from "+itoa(int(c))+". "+strings.Repeat("And some more words. ", 5), s[0].Text)
		require.Equal(t, []string{"hello from " + itoa(int(c)), "second"}, ag.userTexts(ids[c]))
		at := em.callsTo(c)
		require.Greater(t, len(at), 4, "replies streamed in 3 s show edits")
		checkPaced(t, fmt.Sprintf("chat %d", c), at, 1)
	}
}

func itoa(i int) string { return fmt.Sprint(i) }
