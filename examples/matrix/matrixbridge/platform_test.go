package matrixbridge

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSend_A8_MatrixErrorsMapped: a rate limit and homeserver errors are
// retryable, refusals are permanent, and the error text carries neither
// the URL, the token nor the homeserver's message.
func TestSend_A8_MatrixErrorsMapped(t *testing.T) {
	cases := []struct {
		status    int
		errcode   string
		retryable bool
	}{
		{http.StatusTooManyRequests, "M_LIMIT_EXCEEDED", true},
		{http.StatusInternalServerError, "M_UNKNOWN", true},
		{http.StatusBadGateway, "", true},
		{http.StatusServiceUnavailable, "", true},
		{http.StatusForbidden, "M_FORBIDDEN", false},
		{http.StatusBadRequest, "M_BAD_JSON", false},
		{http.StatusUnauthorized, "M_UNKNOWN_TOKEN", false},
		{http.StatusNotFound, "M_NOT_FOUND", false},
		{http.StatusRequestEntityTooLarge, "M_TOO_LARGE", false},
	}
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	for _, c := range cases {
		hs.failNext(c.status, c.errcode)
		err := send(t, p, "ch", &imv2.ChatMessage{MessageID: "m", Text: "hi"})
		require.Error(t, err, "HTTP %d", c.status)
		require.Equal(t, c.retryable, imv2.IsRetryable(err), "HTTP %d %s", c.status, c.errcode)
		text := err.Error()
		require.Contains(t, text, "HTTP")
		for _, leak := range []string{"tok-SECRET", hs.srv.URL, "secret-ish", "!room"} {
			require.NotContains(t, text, leak)
		}
	}
	// The same send then succeeds, once.
	require.NoError(t, send(t, p, "ch", &imv2.ChatMessage{MessageID: "m", Text: "hi"}))
	events, _, _ := hs.snapshot()
	require.Len(t, events, 1)
}

// TestSend_A8_RateLimitCarriesRetryAfter: a 429 with retry_after_ms hands
// the delay to the kit's pacing (connector.RetryAfter), retryable.
func TestSend_A8_RateLimitCarriesRetryAfter(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	hs.mu.Lock()
	hs.fail = append(hs.fail, fakeFail{status: http.StatusTooManyRequests, errcode: "M_LIMIT_EXCEEDED", retryAfterMS: 1500})
	hs.mu.Unlock()
	err := send(t, p, "ch", &imv2.ChatMessage{MessageID: "m", Text: "hi"})
	require.True(t, imv2.IsRetryable(err))
	d, ok := connector.RetryAfterOf(err)
	require.True(t, ok, "429 carries its retry_after_ms")
	require.Equal(t, 1500*time.Millisecond, d)
}

func TestSend_A8_UnreachableIsRetryable(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	hs.srv.Close()
	err := send(t, p, "ch", &imv2.ChatMessage{MessageID: "m", Text: "hi"})
	require.Error(t, err)
	require.True(t, imv2.IsRetryable(err))
	require.NotContains(t, err.Error(), hs.srv.URL)
}

func TestSend_A8_UnboundChannelIsPermanent(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	err := send(t, p, "other", &imv2.ChatMessage{MessageID: "m", Text: "hi"})
	require.Error(t, err)
	require.False(t, imv2.IsRetryable(err))
	require.True(t, errors.Is(err, &imv2.Error{Code: protocol.CodeConnectionNotAuthenticated}))
}

// TestSend_M12_FilesAfterTextSameTxnOnRetry: text then every file; a
// retry after a failed file event reuses the transaction IDs (the text is
// not posted twice) and does not upload the file again.
func TestSend_M12_FilesAfterTextSameTxnOnRetry(t *testing.T) {
	hs := newFakeHS(t)
	p, files := hs.bound(t)
	ctx := context.Background()
	f1, err := files.OfferFile(ctx, "ch", "a.txt", "text/plain", strings.NewReader("AAA"))
	require.NoError(t, err)
	f2, err := files.OfferFile(ctx, "ch", "b.png", "image/png", bytes.NewReader([]byte("\x89PNG....")))
	require.NoError(t, err)
	m := &imv2.ChatMessage{MessageID: "r1", Text: "two files", Files: []imv2.File{
		{Type: imv2.FileFile, FileRef: f1.FileRef}, {Type: imv2.FileImage, FileRef: f2.FileRef},
	}}

	// Requests: text, upload 1, event 1, upload 2, event 2 — fail the last.
	hs.failRequest(5, http.StatusBadGateway)
	err = send(t, p, "ch", m)
	require.Error(t, err)
	require.True(t, imv2.IsRetryable(err), "M12: not accepted until every event was sent")
	require.NoError(t, send(t, p, "ch", m))

	events, _, uploads := hs.snapshot()
	require.Equal(t, 2, uploads, "the retry reuses both uploads")
	var bodies []string
	for _, e := range events {
		bodies = append(bodies, e.Content["body"].(string)+"|"+e.Content["msgtype"].(string))
	}
	require.Equal(t, []string{"two files|m.text", "a.txt|m.file", "b.png|m.image"}, bodies)
}

// TestFinish_M11_TextTxnSharedWithSend: the final's text uses one
// transaction ID whether it edits the draft (Finish) or is posted new
// (Send), so the homeserver answers a resend after a restart with the
// first event.
func TestFinish_M11_TextTxnSharedWithSend(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	ctx := context.Background()
	h, err := p.PostDraft(ctx, conv("ch"), "r1", "Hel")
	require.NoError(t, err)
	require.NoError(t, p.Edit(ctx, conv("ch"), h, "Hello"))
	require.NoError(t, p.Finish(ctx, conv("ch"), h, message(t, p, "ch", &imv2.ChatMessage{MessageID: "r1", Text: "Hello!"})))
	require.NoError(t, send(t, p, "ch", &imv2.ChatMessage{MessageID: "r1", Text: "Hello!"}))

	events, puts, _ := hs.snapshot()
	require.Len(t, events, 3, "post, edit, final edit; the Send was deduplicated")
	require.Len(t, puts, 4)
	require.Equal(t, puts[2], puts[3], "Finish and Send share the transaction ID")
	final := events[2].Content
	require.Equal(t, "* Hello!", final["body"])
	require.Equal(t, "Hello!", final["m.new_content"].(map[string]any)["body"])
	rel := final["m.relates_to"].(map[string]any)
	require.Equal(t, "m.replace", rel["rel_type"])
	require.Equal(t, h, rel["event_id"])
}

// TestSend_M11_DraftSurvivesRestart: a draft posted before a restart is
// finished by the final's Send, not posted anew.
func TestSend_M11_DraftSurvivesRestart(t *testing.T) {
	hs := newFakeHS(t)
	dir := t.TempDir()
	cfg := Config{Build: protocol.Build{BuildTime: "1"}, APIKey: "k", StateDir: dir}
	p1, err := New(cfg)
	require.NoError(t, err)
	hs.bind(t, p1)
	ctx := context.Background()
	h, err := p1.PostDraft(ctx, conv("ch"), "r1", "partial")
	require.NoError(t, err)
	require.NoError(t, p1.Close())

	p2, err := New(cfg)
	require.NoError(t, err)
	defer p2.Close()
	require.NoError(t, send(t, p2, "ch", &imv2.ChatMessage{MessageID: "r1", Text: "complete"}))

	events, _, _ := hs.snapshot()
	require.Len(t, events, 2)
	rel := events[1].Content["m.relates_to"].(map[string]any)
	require.Equal(t, h, rel["event_id"], "the final edits the draft")
	b, _ := p2.store.Get("ch")
	require.Empty(t, b.Drafts, "D10: the finished draft is forgotten")
}

// TestFinish_M11_EmptyTextRedactsDraft: a file-only final removes the
// partial text rather than leaving it beside the file.
func TestFinish_M11_EmptyTextRedactsDraft(t *testing.T) {
	hs := newFakeHS(t)
	p, files := hs.bound(t)
	ctx := context.Background()
	h, err := p.PostDraft(ctx, conv("ch"), "r1", "partial")
	require.NoError(t, err)
	f, err := files.OfferFile(ctx, "ch", "a.txt", "text/plain", strings.NewReader("A"))
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx, conv("ch"), h, message(t, p, "ch", &imv2.ChatMessage{MessageID: "r1", Files: []imv2.File{{Type: imv2.FileFile, FileRef: f.FileRef}}})))
	_, puts, _ := hs.snapshot()
	require.Len(t, puts, 3)
	require.Contains(t, puts[1], "/redact/"+h+"/")
}

func TestTyping_C5_OnAndOff(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	ctx := context.Background()
	require.NoError(t, p.Typing(ctx, conv("ch"), imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "web_search"}))
	require.NoError(t, p.Typing(ctx, conv("ch"), imv2.ChatActivity{Status: imv2.ActivityIdle}))
	hs.mu.Lock()
	defer hs.mu.Unlock()
	require.Equal(t, []bool{true, false}, hs.typing)
}

func TestFileStore_TokensPrivateAndDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	st, err := OpenFileStore(path)
	require.NoError(t, err)
	ctx := context.Background()
	b := Binding{ChannelID: "c1", Homeserver: "https://hs", UserID: "@a:hs", AccessToken: "secret", RoomID: "!r:hs", Since: "s1"}
	for i := 0; i < MaxDraftsPerBinding+5; i++ {
		b.addDraft(string(rune('a'+i%26))+strings.Repeat("x", i), "$e")
	}
	require.Len(t, b.Drafts, MaxDraftsPerBinding, "the draft handles are capped")
	require.NoError(t, st.Put(ctx, b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file holds access tokens")

	st2, err := OpenFileStore(path)
	require.NoError(t, err)
	got, err := st2.Load(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "secret", got[0].AccessToken)
	require.Equal(t, "s1", got[0].Since)
	require.NoError(t, st2.Delete(ctx, "c1"))
	st3, err := OpenFileStore(path)
	require.NoError(t, err)
	got, _ = st3.Load(ctx)
	require.Empty(t, got)

	require.NoError(t, os.WriteFile(path, []byte("{torn"), 0o600))
	_, err = OpenFileStore(path)
	require.Error(t, err)
}

func TestMessageID_I4_StableAndBounded(t *testing.T) {
	a := MessageID("!r:hs", "$event1")
	require.Equal(t, a, MessageID("!r:hs", "$event1"), "a replayed event gives the same message_id")
	require.NotEqual(t, a, MessageID("!r:hs", "$event2"))
	require.NotEqual(t, a, MessageID("!other:hs", "$event1"))
	require.Equal(t, connector.EventMessageID("!r:hs", "$event1"), a, "the kit derives it")
	require.LessOrEqual(t, len(MessageID("!r:hs", strings.Repeat("x", 255))), imv2.MaxIDBytes)
}

func TestParseForm(t *testing.T) {
	ok := map[string]string{FieldHomeserver: "https://hs.example", FieldUserID: "@bot:hs.example", FieldPassword: "pw", FieldRoom: "#room:hs.example"}
	f, err := ParseForm(ok)
	require.NoError(t, err)
	require.Equal(t, "pw", f.Password)
	cases := map[string]func(m map[string]string){
		"no homeserver":   func(m map[string]string) { delete(m, FieldHomeserver) },
		"ftp homeserver":  func(m map[string]string) { m[FieldHomeserver] = "ftp://hs" },
		"userinfo in URL": func(m map[string]string) { m[FieldHomeserver] = "https://u:p@hs" },
		"no user":         func(m map[string]string) { delete(m, FieldUserID) },
		"bad user":        func(m map[string]string) { m[FieldUserID] = "bot" },
		"no secret":       func(m map[string]string) { delete(m, FieldPassword) },
		"no room":         func(m map[string]string) { delete(m, FieldRoom) },
		"bad room":        func(m map[string]string) { m[FieldRoom] = "room" },
	}
	for name, mod := range cases {
		in := map[string]string{}
		for k, v := range ok {
			in[k] = v
		}
		mod(in)
		_, err := ParseForm(in)
		var se *SignInError
		require.ErrorAs(t, err, &se, name)
		require.NotContains(t, err.Error(), "pw", name)
	}
}

func TestNewCard_H1_Valid(t *testing.T) {
	c := NewCard(protocol.Build{Version: "1", BuildTime: "2611300000"})
	require.NoError(t, c.Validate())
}
