//go:build unix

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/xfiles"
)

// TestFallbacks_NoTypingNoFilesOnTheEmulator: telegram-test-api lacks
// sendChatAction and sendDocument (404 through the proxy). The bridge tries
// typing once and then shows none; it tries the first file once and then
// sends each final's files as the Connector's signed download links (a
// message of its own when learnt mid-reply, in the final's text after),
// and a link downloads the file without a header (T3).
func TestFallbacks_NoTypingNoFilesOnTheEmulator(t *testing.T) {
	em := startEmulator(t)
	addr := freeAddr(t)
	conn := startBridge(t, em, addr, t.TempDir(), func(c *tgbridge.Config) { c.PublicURL = "http://" + addr })
	defer conn.stop(t)
	ctx := ctxFor(t, 2*time.Minute)
	ag := startAgent(t, ctx, addr, func(ctx context.Context, r *dataplane.Reply, m imv2.ChatMessage) {
		_ = r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking})
		up, err := xfiles.Upload(ctx, nil, "http://"+addr, apiKey, r.ChannelID(), "notes.txt", strings.NewReader("notes for "+m.Text))
		if err != nil {
			t.Errorf("upload: %v", err)
			return
		}
		_, _ = r.Final(ctx, imv2.ChatMessage{Text: "reply to " + m.Text, Files: []imv2.File{up.File()}})
	})
	ag.pair(t, ctx, em, 5)
	em.say(t, 5, "one")
	require.Eventually(t, func() bool { return len(em.shown()[5]) == 2 }, time.Minute, 50*time.Millisecond)
	em.say(t, 5, "two")
	require.Eventually(t, func() bool { return len(em.shown()[5]) == 3 }, time.Minute, 50*time.Millisecond)

	s := em.shown()[5]
	require.Equal(t, "reply to one", s[0].Text)
	link, ok := strings.CutPrefix(s[1].Text, "📎 notes.txt: http://"+addr+"/files/refs/")
	require.True(t, ok, "the file as a link: %q", s[1].Text)
	text, link2, ok := strings.Cut(s[2].Text, "\n📎 notes.txt: ")
	require.True(t, ok, "the link in the final's text: %q", s[2].Text)
	require.Equal(t, "reply to two", text)
	for want, url := range map[string]string{"notes for one": "http://" + addr + "/files/refs/" + link, "notes for two": link2} {
		resp, err := http.Get(url)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, want, string(body))
	}
	count := map[string]int{}
	for _, c := range em.Calls() {
		count[c.Method]++
	}
	require.Equal(t, 1, count["sendChatAction"], "typing tried once")
	require.Equal(t, 1, count["sendDocument"], "a file sent once")
}
