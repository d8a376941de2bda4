package tgbridge_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/sim"
)

const apiKey = "unit-api-key-of-at-least-22-chars"

// newBridge starts a Bridge against a, bound to chat 42, in mode; opts
// change its Config.
func newBridge(t *testing.T, a *docAPI, mode connector.Mode, opts ...func(*tgbridge.Config)) *tgbridge.Bridge {
	t.Helper()
	cfg := tgbridge.Config{Build: protocol.Build{Version: "test", BuildTime: "2612040000"},
		APIKey: apiKey, Token: token, Server: a.srv.URL, Chat: "42", Mode: mode, PollTimeout: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	b, err := tgbridge.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		if t.Failed() {
			t.Logf("Bot API calls:\n%s", a)
		}
	})
	return b
}

// TestDocAPI_StreamMode_DraftsTypingAndDocument: against a server with
// sendMessageDraft the bridge streams in drafts (ModeStream, chosen at
// New): one draft_id whose text grows, then the final by sendMessage; the
// thinking activity shows as sendChatAction typing; the final's file goes
// by sendDocument, bytes and name intact.
func TestDocAPI_StreamMode_DraftsTypingAndDocument(t *testing.T) {
	a := startDocAPI(t)
	b := newBridge(t, a, connector.ModeAuto)
	require.Equal(t, connector.ModeStream, b.Mode())
	file := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(file, []byte("the notes"), 0o600))
	reply := "one two three four five six seven eight nine ten"
	s := imv2test.StartSim(t, b.Connector(), sim.Config{Rate: 50, Attach: file, Reply: func(string) string { return reply }})
	a.say(42, "hello", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.WaitAcked(ctx, 1))
	drafts := a.called("sendMessageDraft")[1:] // the first is New's probe (chat 0)
	require.Greater(t, len(drafts), 2, "the reply streamed in drafts")
	for i, d := range drafts {
		require.Equal(t, drafts[0].draft, d.draft, "one draft_id")
		require.True(t, strings.HasPrefix(reply, d.text), "draft %d %q", i, d.text)
	}
	sent := a.called("sendMessage")
	require.Len(t, sent, 1)
	require.Equal(t, reply, sent[0].text)
	require.NotEmpty(t, a.called("sendChatAction"))
	docs := a.called("sendDocument")
	require.Len(t, docs, 1)
	require.Equal(t, "notes.txt", docs[0].file)
	require.Equal(t, "the notes", string(docs[0].data))
}

// TestDocAPI_InboundDocument_RetryAfter_LongReplySplit: a person's
// document reaches xAgent as a file (getFile, then its download path)
// with the caption as text; the final's first sendMessage is answered 429
// with retry_after 3, and the bridge waits 3 s (over the 1 s pace) before the next; a
// reply of 9,000 characters goes as three messages in order, each within
// Telegram's 4,096 (UTF-16 units).
func TestDocAPI_InboundDocument_RetryAfter_LongReplySplit(t *testing.T) {
	a := startDocAPI(t)
	b := newBridge(t, a, connector.ModeBuffer)
	long := strings.Repeat("line of the long reply 😀\n", 360) // 9,000 UTF-16 units
	s := imv2test.StartSim(t, b.Connector(), sim.Config{Reply: func(string) string { return long }})
	a.mu.Lock()
	a.files["doc1"] = []byte("report bytes")
	a.limited["sendMessage"] = 1
	a.mu.Unlock()
	a.say(42, "see attached", map[string]any{"file_id": "doc1", "file_unique_id": "u1", "file_name": "report.txt",
		"mime_type": "text/plain", "file_size": 12})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.WaitAcked(ctx, 1))
	users := s.UserMessages()
	require.Len(t, users, 1)
	require.Equal(t, "see attached", users[0].Text)
	require.Len(t, users[0].Files, 1)
	require.Equal(t, "report.txt", users[0].Files[0].Filename)
	got, err := s.Fetch(ctx, users[0].Files[0])
	require.NoError(t, err)
	require.Equal(t, "report bytes", string(got))

	sends := a.called("sendMessage")
	require.Equal(t, 429, sends[0].status)
	var parts []string
	for _, c := range sends[1:] {
		require.Equal(t, 200, c.status)
		require.LessOrEqual(t, len(utf16.Encode([]rune(c.text))), tgbridge.MaxTextChars)
		parts = append(parts, c.text)
	}
	require.GreaterOrEqual(t, sends[1].at.Sub(sends[0].at), 3*time.Second, "retry_after obeyed")
	require.Len(t, parts, 3)
	require.Equal(t, long, strings.Join(parts, ""))
}
