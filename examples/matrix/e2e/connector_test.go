//go:build unix

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/xfiles"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

const apiKey = "e2e-api-key"

// cutProxy sits between the Connector and Dendrite. While armed it lets a
// PUT …/send/… reach the homeserver and then drops the answer, answering
// 502: the event exists, but the Connector cannot know — a crash between
// the Matrix side effect and the ack.
type cutProxy struct {
	srv   *http.Server
	URL   string
	armed atomic.Bool
	hits  chan string
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	p := &cutProxy{hits: make(chan string, 64)}
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := &http.Transport{}
	rp.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err == nil && p.armed.Load() && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/send/") {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			select {
			case p.hits <- r.URL.Path:
			default:
			}
			return nil, errors.New("cut after the homeserver answered")
		}
		return resp, err
	})
	rp.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	p.URL = "http://" + l.Addr().String()
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(func() {
		_ = p.srv.Close()
		tr.CloseIdleConnections()
	})
	return p
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// runningConnector is one Connector process: a Bridge behind an
// http.Server on a fixed loopback address, so a restart listens where
// xAgent reconnects.
type runningConnector struct {
	b   *matrixbridge.Bridge
	srv *http.Server
	err chan error
}

func startConnector(t *testing.T, addr, stateDir string) *runningConnector {
	t.Helper()
	b, err := matrixbridge.New(matrixbridge.Config{
		Build:    protocol.Build{Version: "e2e", BuildTime: "2611300000"},
		APIKey:   apiKey,
		StateDir: stateDir,
		Display:  displayOptions(),
		// Dendrite listens on loopback: trust it for media downloads.
		PrivateHomeservers: true,
	})
	require.NoError(t, err)
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	rc := &runningConnector{b: b, srv: connector.NewServer(addr, b.Handler()), err: make(chan error, 1)}
	go func() { rc.err <- rc.srv.Serve(l) }()
	return rc
}

// displayOptions edit at most every 50 ms, so a streamed reply shows a
// few edits within the test.
func displayOptions() connector.Display {
	return connector.Display{Interval: 50 * time.Millisecond}
}

// stop is a crash as far as xAgent can tell: connections drop, nothing
// is acked any more; the state directory stays.
func (rc *runningConnector) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, rc.srv.Close())
	require.NoError(t, rc.b.Close())
	require.ErrorIs(t, <-rc.err, http.ErrServerClosed)
}

// agent is the xAgent side's Target: it records user messages.
type agent struct {
	mu   sync.Mutex
	seen map[string]int // message_id → PostMessage calls
	msgs chan imv2.ChatMessage
}

func (a *agent) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	a.seen[m.MessageID]++
	a.mu.Unlock()
	a.msgs <- *m
	return nil
}

func (a *agent) count(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[id]
}

// next returns the next user message the agent got.
func (a *agent) next(t *testing.T) imv2.ChatMessage {
	t.Helper()
	select {
	case m := <-a.msgs:
		return m
	case <-time.After(waitTimeout):
		t.Fatal("no user message reached xAgent")
	}
	return imv2.ChatMessage{}
}

// acks records the terminal acks the xAgent side got for its finals, and
// the user messages it received more than once.
type acks struct {
	ch   chan imv2.Event
	mu   sync.Mutex
	dups []string
}

func (a *acks) Observe(e imv2.Event) {
	switch e.Kind {
	case imv2.EventAcked, imv2.EventFailed:
		a.ch <- e
	case imv2.EventDuplicate:
		a.mu.Lock()
		a.dups = append(a.dups, e.MessageID)
		a.mu.Unlock()
	}
}

func (a *acks) duplicates() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.dups...)
}

func (a *acks) wait(t *testing.T, messageID string) imv2.Event {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case e := <-a.ch:
			if e.MessageID == messageID {
				return e
			}
		case <-deadline:
			t.Fatalf("no terminal ack for %s", messageID)
		}
	}
}

// TestConnector_EndToEnd runs the Matrix Connector against a real Dendrite
// with a simulated xAgent (dataplane.Dial + imv2.Channel in the xAgent
// role) and checks from the second Matrix user's /sync:
//
//   - sign-in by the form flow → Descriptor connected, no secret on the wire;
//   - a user message reaches xAgent once (M9, I4);
//   - a streamed reply is one event plus m.replace edits whose last body is
//     the final text (D8, M11), typing shown and cleared (C5–C7);
//   - a reply with a file arrives as m.file with identical bytes (M7, M12);
//   - an image from the user reaches xAgent through a signed URL (M6);
//   - a final whose Matrix send happened but whose ack was lost is resent
//     by xAgent to the restarted Connector and produces no second event
//     (same transaction ID), and an acked final resent after the restart
//     is answered duplicate (S8).
func TestConnector_EndToEnd(t *testing.T) {
	start := time.Now()
	w := newWorld(t)
	proxy := newCutProxy(t, w.hs.URL)
	stateDir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	bot := id.UserID(w.botID)

	conn := startConnector(t, addr, stateDir)
	defer func() {
		if conn != nil {
			conn.stop(t)
		}
	}()

	ag := &agent{seen: map[string]int{}, msgs: make(chan imv2.ChatMessage, 16)}
	ack := &acks{ch: make(chan imv2.Event, 64)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pending := imv2.NewMemoryPendingStore(0) // xAgent's finals not yet acked, read at the end
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL:      base,
		APIKey:   apiKey,
		Target:   ag,
		Options:  &imv2.Options{Pending: pending, Observer: ack, RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond},
		Advanced: dataplane.ClientAdvanced{CardID: matrixbridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	defer cli.Close()
	chID, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)

	// Sign-in: the form flow binds the room; the ack carries a connected
	// Descriptor and neither the password nor a token.
	form := w.form()
	form[matrixbridge.FieldHomeserver] = proxy.URL
	req, err := imv2.NewPacket(protocol.TypeAuthStart, chID, protocol.AuthStart{FlowID: matrixbridge.FlowID, Input: form})
	require.NoError(t, err)
	ans, err := cli.Request(ctx, req)
	require.NoError(t, err)
	var authAck protocol.AuthAck
	require.NoError(t, ans.DecodePayload(&authAck))
	require.Equal(t, protocol.AuthAuthenticated, authAck.Status, authAck.Message)
	require.NotNil(t, authAck.ConnectionDescriptor)
	require.Equal(t, protocol.StatusConnected, authAck.ConnectionDescriptor.Connection.Status)
	raw, _ := json.Marshal(ans)
	require.NotContains(t, string(raw), w.botPass)
	require.NotContains(t, string(raw), "access_token")
	require.NotContains(t, string(raw), "syt_") // Dendrite token prefix, if any

	// M9: a user message reaches xAgent once, with an ID derived from the event.
	hello := w.alice.say("hello bot")
	um := ag.next(t)
	require.Equal(t, "hello bot", um.Text)
	require.Equal(t, matrixbridge.MessageID(w.room.String(), hello.String()), um.MessageID)

	// C5: thinking shows typing in the room.
	r1, err := cli.NewReply(chID, "")
	require.NoError(t, err)
	require.NoError(t, r1.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking}))
	w.alice.waitFor("typing shown", func() bool { return typingHas(w.alice.typing, bot) })

	// D8, M11: a streamed reply is one event plus edits; the last shown
	// body is exactly the final text. C6: the first draft clears typing.
	require.NoError(t, r1.Delta(ctx, "The"))
	w.alice.waitFor("first draft", func() bool { return lastShown(w.alice.messagesFrom(bot)) == "The" })
	for _, d := range []string{" answer", " is", " forty"} {
		require.NoError(t, r1.Delta(ctx, d))
	}
	w.alice.waitFor("an edit", func() bool { _, e := split(w.alice.messagesFrom(bot)); return len(e) > 0 })
	const finalText = "The answer is 42."
	_, err = r1.Final(ctx, imv2.ChatMessage{Text: finalText})
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, ack.wait(t, r1.MessageID()).Status)
	w.alice.waitFor("final edit", func() bool { return lastShown(w.alice.messagesFrom(bot)) == finalText })
	w.alice.waitFor("typing cleared", func() bool { return typingCleared(w.alice.typing, bot) })
	originals, edits := split(w.alice.messagesFrom(bot))
	require.Len(t, originals, 1, "one event for the streamed reply")
	require.GreaterOrEqual(t, len(edits), 2, "draft edit(s) and the final edit")
	for _, e := range edits {
		target, _ := isEdit(e)
		require.Equal(t, originals[0].ID, target)
	}

	// M7, M12: a reply with a file: uploaded to the Connector first, then
	// posted as text plus an m.file with identical bytes.
	data := make([]byte, 200_000)
	_, _ = rand.Read(data)
	up, err := xfiles.Upload(ctx, http.DefaultClient, base, apiKey, chID, "report.bin", bytes.NewReader(data))
	require.NoError(t, err)
	r2, err := cli.NewReply(chID, "")
	require.NoError(t, err)
	_, err = r2.Final(ctx, imv2.ChatMessage{Text: "Here is the report.", Files: []imv2.File{up.File()}})
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, ack.wait(t, r2.MessageID()).Status)
	w.alice.waitFor("file event", func() bool { return lastMsgType(w.alice.timeline) == event.MsgFile })
	fe := w.alice.timeline[len(w.alice.timeline)-1].Content.AsMessage()
	require.Equal(t, "report.bin", fe.Body)
	require.True(t, bytes.Equal(data, download(t, w.alice.cli, fe.URL)), "m.file bytes differ")

	// M6: an image from alice reaches xAgent with a signed download_url.
	img := make([]byte, 30_000)
	_, _ = rand.Read(img)
	upImg, err := w.alice.cli.UploadBytesWithName(ctx, img, "image/png", "cat.png")
	require.NoError(t, err)
	_, err = w.alice.cli.SendMessageEvent(ctx, w.room, event.EventMessage, &event.MessageEventContent{
		MsgType: event.MsgImage, Body: "cat.png", URL: upImg.ContentURI.CUString(), Info: &event.FileInfo{MimeType: "image/png", Size: len(img)},
	})
	require.NoError(t, err)
	im := ag.next(t)
	require.Len(t, im.Files, 1)
	require.Equal(t, imv2.FileImage, im.Files[0].Type)
	got, err := xfiles.Fetch(ctx, http.DefaultClient, base, im.Files[0], 1<<20)
	require.NoError(t, err)
	require.True(t, bytes.Equal(img, got), "offered image bytes differ")

	// S8 + homeserver dedup: the Matrix send of this final succeeds but its
	// answer is lost, so the Connector never records it and xAgent keeps
	// resending; then the Connector crashes.
	proxy.armed.Store(true)
	r3, err := cli.NewReply(chID, "")
	require.NoError(t, err)
	const crashText = "This reply survives a restart."
	_, err = r3.Final(ctx, imv2.ChatMessage{Text: crashText})
	require.NoError(t, err)
	select {
	case <-proxy.hits:
	case <-time.After(waitTimeout):
		t.Fatal("the final never reached the homeserver")
	}
	w.alice.waitFor("the event of the cut send", func() bool { return countBody(w.alice.messagesFrom(bot), crashText) == 1 })
	conn.stop(t)
	conn = nil
	proxy.armed.Store(false)

	// The restarted Connector restores the binding and the channel ID;
	// xAgent reconnects by itself and resends the pending final, which the
	// homeserver deduplicates by transaction ID.
	conn = startConnector(t, addr, stateDir)
	require.Equal(t, imv2.AckAccepted, ack.wait(t, r3.MessageID()).Status)
	// A final already acked before the crash, resent: duplicate (S8).
	_, err = cli.Send(ctx, chID, imv2.ChatMessage{MessageID: r1.MessageID(), Text: finalText})
	require.NoError(t, err)
	require.Equal(t, imv2.AckDuplicate, ack.wait(t, r1.MessageID()).Status)

	// The restored channel reads the room again; the marker orders the
	// timeline, so nothing the bot sent before it can still be missing.
	marker := w.alice.say("marker after restart")
	mm := ag.next(t)
	require.Equal(t, matrixbridge.MessageID(w.room.String(), marker.String()), mm.MessageID)
	require.Equal(t, chID, cli.Resolve(chID), "the channel kept its ID across the restart")
	require.NotNil(t, cli.Negotiated(chID), "and is held")
	w.alice.waitFor("marker", func() bool { return lastBody(w.alice.timeline) == "marker after restart" })
	require.Equal(t, 1, countBody(w.alice.messagesFrom(bot), crashText), "no second event after the restart")
	originals, _ = split(w.alice.messagesFrom(bot))
	require.Len(t, originals, 4, "streamed reply, report text, report file, the crash reply")
	require.Equal(t, 1, ag.count(um.MessageID), "the user message reached xAgent once")
	require.Empty(t, ack.duplicates(), "no user message was sent to xAgent twice")
	left, err := pending.List(ctx, chID)
	require.NoError(t, err)
	require.Empty(t, left)

	// auth.logout forgets the binding (and its token) and the descriptor
	// drops back to created.
	req, err = imv2.NewPacket(protocol.TypeAuthLogout, chID, nil)
	require.NoError(t, err)
	ans, err = cli.Request(ctx, req)
	require.NoError(t, err)
	var out protocol.StatusOK
	require.NoError(t, ans.DecodePayload(&out))
	require.Equal(t, "ok", out.Status)
	require.NotNil(t, out.ConnectionDescriptor)
	require.Equal(t, protocol.StatusCreated, out.ConnectionDescriptor.Connection.Status)
	_, bound, err := conn.b.Connector().Binding(ctx, chID)
	require.NoError(t, err)
	require.False(t, bound, "the binding and its token are forgotten")
	t.Logf("end-to-end wall time (Dendrite already built): %s", time.Since(start).Round(time.Millisecond))
}

// TestConnector_TokenSignInAndExpiry: a wrong password is refused with
// status failed; an access token signs in (via /whoami); when the token is
// revoked on the homeserver, the Connector pushes a Descriptor with status
// expired (W7) without waiting to be asked.
func TestConnector_TokenSignInAndExpiry(t *testing.T) {
	hs := startDendrite(t)
	aliceID, aliceTok := hs.createUser("alice", "alice-password-1")
	botID, botTok := hs.createUser("bot", "bot-password-1")
	alice := newUser(t, hs.URL, aliceID, aliceTok)
	room := alice.createRoom()
	addr := freeAddr(t)
	conn := startConnector(t, addr, "")
	defer conn.stop(t)

	descs := make(chan *protocol.Descriptor, 16)
	ctx := ctxFor(t)
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: "http://" + addr, APIKey: apiKey,
		Target:       &agent{seen: map[string]int{}, msgs: make(chan imv2.ChatMessage, 16)},
		OnDescriptor: func(_ string, d *protocol.Descriptor) { descs <- d },
		Advanced:     dataplane.ClientAdvanced{CardID: matrixbridge.CardID},
	})
	require.NoError(t, err)
	defer cli.Close()
	xch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusCreated, (<-descs).Connection.Status)

	start := func(input map[string]string) protocol.AuthAck {
		req, err := imv2.NewPacket(protocol.TypeAuthStart, xch, protocol.AuthStart{FlowID: matrixbridge.FlowID, Input: input})
		require.NoError(t, err)
		ans, err := cli.Request(ctx, req)
		require.NoError(t, err)
		raw, _ := json.Marshal(ans)
		require.NotContains(t, string(raw), "wrong-password")
		require.NotContains(t, string(raw), botTok)
		var a protocol.AuthAck
		require.NoError(t, ans.DecodePayload(&a))
		return a
	}
	bad := start(map[string]string{
		matrixbridge.FieldHomeserver: hs.URL, matrixbridge.FieldUserID: botID,
		matrixbridge.FieldPassword: "wrong-password", matrixbridge.FieldRoom: room.String(),
	})
	require.Equal(t, protocol.AuthFailed, bad.Status)
	require.NotEmpty(t, bad.Message)

	good := start(map[string]string{
		matrixbridge.FieldHomeserver: hs.URL, matrixbridge.FieldUserID: botID,
		matrixbridge.FieldAccessToken: botTok, matrixbridge.FieldRoom: room.String(),
	})
	require.Equal(t, protocol.AuthAuthenticated, good.Status, good.Message)
	require.Equal(t, protocol.StatusConnected, good.ConnectionDescriptor.Connection.Status)

	// The token is revoked on the homeserver: the Connector notices on its
	// next /sync and pushes the new state. Alice's message ends the /sync
	// long poll in flight, so the next one comes at once.
	revoker := newUser(t, hs.URL, botID, botTok)
	_, err = revoker.cli.Logout(ctx)
	require.NoError(t, err)
	alice.say("wake up")
	for {
		select {
		case d := <-descs:
			if d.Connection.Status == protocol.StatusExpired {
				return
			}
		case <-ctx.Done():
			t.Fatal("no descriptor push with status expired")
		}
	}
}

func countBody(evs []*event.Event, body string) int {
	n := 0
	for _, e := range evs {
		if _, edit := isEdit(e); !edit && e.Content.AsMessage().Body == body {
			n++
		}
	}
	return n
}
