package matrixbridge

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
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
		require.Equal(t, c.retryable, imv2.SafeToRetry(err), "HTTP %d %s", c.status, c.errcode)
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
// the delay to the kit's pacing (imv2.RetryAfter), retryable.
func TestSend_A8_RateLimitCarriesRetryAfter(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	hs.mu.Lock()
	hs.fail = append(hs.fail, fakeFail{status: http.StatusTooManyRequests, errcode: "M_LIMIT_EXCEEDED", retryAfterMS: 1500})
	hs.mu.Unlock()
	err := send(t, p, "ch", &imv2.ChatMessage{MessageID: "m", Text: "hi"})
	require.True(t, imv2.SafeToRetry(err))
	d, ok := imv2.RetryAfterOf(err)
	require.True(t, ok, "429 carries its retry_after_ms")
	require.Equal(t, 1500*time.Millisecond, d)
}

func TestSend_A8_UnreachableIsRetryable(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	hs.srv.Close()
	err := send(t, p, "ch", &imv2.ChatMessage{MessageID: "m", Text: "hi"})
	require.Error(t, err)
	require.True(t, imv2.SafeToRetry(err))
	require.NotContains(t, err.Error(), hs.srv.URL)
}

func TestSend_A8_UnboundChannelIsPermanent(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	err := send(t, p, "other", &imv2.ChatMessage{MessageID: "m", Text: "hi"})
	require.Error(t, err)
	require.False(t, imv2.SafeToRetry(err))
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
	require.True(t, imv2.SafeToRetry(err), "M12: not accepted until every event was sent")
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
	h, err := p.PostDraft(ctx, conv(t, p, "ch"), "r1", "Hel")
	require.NoError(t, err)
	require.NoError(t, p.Edit(ctx, conv(t, p, "ch"), h, "Hello"))
	require.NoError(t, p.Finish(ctx, conv(t, p, "ch"), h, message(t, p, "ch", &imv2.ChatMessage{MessageID: "r1", Text: "Hello!"})))
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
// finished by the final, not posted anew, and its handle is forgotten
// (the kit keeps it in the binding, in imv2.db).
func TestSend_M11_DraftSurvivesRestart(t *testing.T) {
	hs := newFakeHS(t)
	cfg := Config{Build: protocol.Build{BuildTime: "1"}, APIKey: "k", StateDir: t.TempDir()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	serve := func(ln net.Listener) (*Bridge, chan error) {
		p, err := New(cfg)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- p.Connector().Serve(context.Background(), ln) }()
		return p, done
	}
	stop := func(p *Bridge, done chan error) {
		require.NoError(t, p.Close())
		require.NoError(t, <-done)
	}
	p1, done := serve(ln)
	acked := make(chan imv2.AckStatus, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: "http://" + addr, APIKey: "k", Target: nopTarget{},
		Advanced: dataplane.ClientAdvanced{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond},
		Options:  &imv2.Options{OnDelivered: func(_ string, _ imv2.ChatMessage, s imv2.AckStatus) { acked <- s }}})
	require.NoError(t, err)
	defer cli.Close()
	ch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	hs.bind(t, p1, ch)
	r, err := cli.NewReply(ch, "")
	require.NoError(t, err)
	require.NoError(t, r.Delta(ctx, "partial"))
	h := testwait.Recv(t, hs.sent, 30*time.Second)
	for { // the kit records the handle once the homeserver answered
		b, _, err := p1.Connector().Binding(ctx, ch)
		require.NoError(t, err)
		if len(b.Drafts) == 1 {
			require.Equal(t, h, b.Drafts[0].Handle)
			break
		}
		require.NoError(t, ctx.Err(), "the draft handle was not recorded")
		time.Sleep(5 * time.Millisecond)
	}
	stop(p1, done)

	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	p2, done := serve(ln)
	defer stop(p2, done)
	for !cli.Connected() || !p2.Connector().Server().IsOpen(ch) {
		require.NoError(t, ctx.Err(), "xAgent did not reconnect")
		time.Sleep(5 * time.Millisecond)
	}
	_, err = r.Final(ctx, imv2.ChatMessage{Text: "complete"})
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, testwait.Recv(t, acked, 30*time.Second))

	events, _, _ := hs.snapshot()
	require.Len(t, events, 2)
	rel := events[1].Content["m.relates_to"].(map[string]any)
	require.Equal(t, h, rel["event_id"], "the final edits the draft")
	b, _, err := p2.Connector().Binding(ctx, ch)
	require.NoError(t, err)
	require.Empty(t, b.Drafts, "D10: the finished draft is forgotten")
}

// nopTarget is an xAgent side that takes every user message.
type nopTarget struct{}

func (nopTarget) PostMessage(context.Context, string, *imv2.ChatMessage) error { return nil }

// TestFinish_M11_EmptyTextRedactsDraft: a file-only final removes the
// partial text rather than leaving it beside the file.
func TestFinish_M11_EmptyTextRedactsDraft(t *testing.T) {
	hs := newFakeHS(t)
	p, files := hs.bound(t)
	ctx := context.Background()
	h, err := p.PostDraft(ctx, conv(t, p, "ch"), "r1", "partial")
	require.NoError(t, err)
	f, err := files.OfferFile(ctx, "ch", "a.txt", "text/plain", strings.NewReader("A"))
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx, conv(t, p, "ch"), h, message(t, p, "ch", &imv2.ChatMessage{MessageID: "r1", Files: []imv2.File{{Type: imv2.FileFile, FileRef: f.FileRef}}})))
	_, puts, _ := hs.snapshot()
	require.Len(t, puts, 3)
	require.Contains(t, puts[1], "/redact/"+h+"/")
}

func TestTyping_C5_OnAndOff(t *testing.T) {
	hs := newFakeHS(t)
	p, _ := hs.bound(t)
	ctx := context.Background()
	require.NoError(t, p.Typing(ctx, conv(t, p, "ch"), imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "web_search"}))
	require.NoError(t, p.Typing(ctx, conv(t, p, "ch"), imv2.ChatActivity{Status: imv2.ActivityIdle}))
	hs.mu.Lock()
	defer hs.mu.Unlock()
	require.Equal(t, []bool{true, false}, hs.typing)
}

// TestState_TokensPrivateAndDurable: the Account (token, /sync position)
// is kept in the kit's binding in imv2.db, mode 0600, across a restart,
// and gone after the unbinding; a torn state file is an error.
func TestState_TokensPrivateAndDurable(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Build: protocol.Build{BuildTime: "1"}, APIKey: "k", StateDir: dir}
	ctx := context.Background()
	acc := Account{Homeserver: "https://hs", UserID: "@a:hs", AccessToken: "secret", Since: "s1"}
	p, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, p.Connector().Bind(ctx, state.Binding{ChannelID: "c1", Key: "!r:hs", Data: acc.Data()}))
	require.NoError(t, p.Close())
	path := filepath.Join(dir, "imv2.db")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file holds access tokens")

	p, err = New(cfg)
	require.NoError(t, err)
	b, ok, err := p.Connector().Binding(ctx, "c1")
	require.NoError(t, err)
	require.True(t, ok)
	got, err := AccountOf(b.Data)
	require.NoError(t, err)
	require.Equal(t, "secret", got.AccessToken)
	require.Equal(t, "s1", got.Since)
	require.NoError(t, p.Connector().Unbind(ctx, "c1"))
	require.NoError(t, p.Close())
	p, err = New(cfg)
	require.NoError(t, err)
	_, ok, err = p.Connector().Binding(ctx, "c1")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, p.Close())

	require.NoError(t, os.WriteFile(path, []byte("{torn"), 0o600))
	_, err = New(cfg)
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
		var se *connector.SignInError
		require.ErrorAs(t, err, &se, name)
		require.NotContains(t, err.Error(), "pw", name)
	}
}

func TestNewCard_H1_Valid(t *testing.T) {
	c := NewCard(protocol.Build{Version: "1", BuildTime: "2611300000"})
	require.NoError(t, c.Validate())
}
