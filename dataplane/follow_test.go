package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/xfiles"
)

// uploadServer serves a Server with a Card and a POST /files/uploads that
// answers 409 channel_not_open for a channel the Server does not have
// open on a connection (as connector.Handler does), refuses the next
// refuse[i] uploads with the status refuse[i] first, and answers the rest
// with file_ref "f_<bytes>".
func uploadServer(t *testing.T, refuse ...int) (*Server, string, *atomic.Int32) {
	t.Helper()
	srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() }})
	require.NoError(t, err)
	var tries atomic.Int32
	inner := withCard(testCard(), srv)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/files/uploads" {
			inner.ServeHTTP(w, r)
			return
		}
		n := int(tries.Add(1))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case !srv.IsOpen(r.Header.Get(xfiles.HeaderChannelID)):
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"channel_not_open","message":"the channel is not open"}}`)
			return
		case n <= len(refuse):
			w.WriteHeader(refuse[n-1])
			_, _ = io.WriteString(w, `{"error":{"code":"channel_not_open","message":"refused for the test"}}`)
			return
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(f)
		_ = json.NewEncoder(w).Encode(map[string]any{"file_ref": "f_" + string(b)})
	}))
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	return srv, "ws" + hs.URL[len("http"):] + "/ws", &tries
}

// TestClient_T1_UploadRetriesARefusalForNow: the Connector answers 409
// channel_not_open (it has not seen the reopen yet) and then 503; Upload
// retries each after the reconnect backoff and returns the file, where
// xfiles alone gave up on the first 409 and the final went out without
// its file.
func TestClient_T1_UploadRetriesARefusalForNow(t *testing.T) {
	_, url, tries := uploadServer(t, http.StatusConflict, http.StatusServiceUnavailable)
	c, clk, _ := dialClient(t, url, nil)
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)

	type result struct {
		f   imv2.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := c.Upload(ctxWait(t), ch, "a.txt", bytes.NewReader([]byte("hello")))
		done <- result{f, err}
	}()
	for range 2 { // one backoff after each refusal
		d := recv(t, clk.armed)
		require.True(t, d >= 500*time.Millisecond && d <= time.Second, "backoff %v outside [min/2, min]", d)
		clk.Advance(time.Second)
	}
	r := recv(t, done)
	require.NoError(t, r.err)
	require.Equal(t, "f_hello", r.f.FileRef, "the body was rewound for the retry")
	require.Equal(t, int32(3), tries.Load())
}

// TestClient_T1_UploadWaitsForTheReopen: an upload started while the
// connection is down waits until the reconnect reopened the channel
// (WaitOpen) instead of failing with the Connector's 409.
func TestClient_T1_UploadWaitsForTheReopen(t *testing.T) {
	srv, url, tries := uploadServer(t)
	c, clk, events := dialClient(t, url, nil)
	recv(t, events) // Dial's, before the channel existed
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	srv.dropConnections()
	recv(t, clk.armed) // the client noticed and sleeps before redialling
	require.False(t, c.Connected())

	done := make(chan error, 1)
	go func() {
		f, err := c.Upload(ctxWait(t), ch, "b.txt", bytes.NewReader([]byte("later")))
		if err == nil && f.FileRef != "f_later" {
			err = errors.New("wrong file_ref " + f.FileRef)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the upload ended while the channel was closed: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Advance(time.Second)
	ev := recv(t, events)
	require.Equal(t, []string{ch}, ev.ids)
	require.NoError(t, recv(t, done))
	require.Equal(t, int32(1), tries.Load(), "nothing was sent before the channel was open")
}

// TestClient_WaitOpen_Refusals: WaitOpen of an unknown or closed channel
// fails at once; of a live one it returns its ID; ctx bounds it.
func TestClient_WaitOpen_Refusals(t *testing.T) {
	srv, url, _ := uploadServer(t)
	c, clk, _ := dialClient(t, url, nil)
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	id, err := c.WaitOpen(ctxWait(t), ch)
	require.NoError(t, err)
	require.Equal(t, ch, id)
	_, err = c.WaitOpen(ctxWait(t), "cch_never")
	require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeChannelNotOpen})

	srv.dropConnections()
	recv(t, clk.armed)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.WaitOpen(ctx, ch)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a stored channel is waited for")
}

// TestClient_W5_UnfinishedReplyFollowsTheNewChannel: the Connector comes
// back without its registry and answers the reopen with a new ID while a
// Reply is half sent. The Reply's next delta and its final go to the new
// channel under the same message_id, OnChannelReplaced reports the pair,
// and Send, NewReply and Resolve follow the old ID. Before, Final
// returned the "closed" error of a closed Client and NewReply(old)
// channel_not_open.
func TestClient_W5_UnfinishedReplyFollowsTheNewChannel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	newSrv := func(target imv2.Target) *Server {
		srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return target }})
		require.NoError(t, err)
		return srv
	}
	first := newRecTarget()
	stop := serveOn(t, addr, newSrv(first))
	replaced := make(chan [2]string, 1)
	c, clk, events := dialClient(t, "ws://"+addr+"/ws", func(cfg *ClientConfig) {
		cfg.OnChannelReplaced = func(old, id string) { replaced <- [2]string{old, id} }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	oldID := ch
	rep, err := c.NewReply(oldID, "r1")
	require.NoError(t, err)
	require.NoError(t, rep.Delta(ctxWait(t), "Hel"))
	require.Equal(t, "Hel", recv(t, first.shown))
	thinking, err := c.NewReply(oldID, "r2")
	require.NoError(t, err)
	require.NoError(t, thinking.Activity(ctxWait(t), imv2.ChatActivity{Status: imv2.ActivityThinking}))
	stop()

	second := newRecTarget()
	serveOn(t, addr, newSrv(second))
	var newID string
	for newID == "" {
		clk.Advance(time.Second)
		select {
		case ev := <-events:
			if len(ev.ids) == 1 {
				newID = ev.ids[0]
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	require.NotEqual(t, oldID, newID)
	require.Equal(t, [2]string{oldID, newID}, recv(t, replaced))
	require.Equal(t, newID, c.Resolve(oldID))
	a, ok := c.activity.other(newID, "")
	require.True(t, ok, "the channel's activity moved to the new ID")
	require.Equal(t, imv2.ActivityThinking, a.Status)

	require.NoError(t, rep.Delta(ctxWait(t), "Hello"), "the delta follows")
	require.Equal(t, "Hello", recv(t, second.shown), "numbered from 1 on the new channel")
	d, err := rep.Final(ctxWait(t), imv2.ChatMessage{Text: "Hello there"})
	require.NoError(t, err, "the final follows")
	require.Equal(t, newID, rep.ChannelID())
	m := second.next(t)
	require.Equal(t, "r1", m.MessageID)
	st, err := d.Wait(ctxWait(t))
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, st)

	rep2, err := c.NewReply(oldID, "")
	require.NoError(t, err, "NewReply follows the old ID")
	require.Equal(t, newID, rep2.ChannelID())
	d, err = c.Send(ctxWait(t), oldID, imv2.ChatMessage{MessageID: "s1", Text: "sent to the old ID"})
	require.NoError(t, err, "Send follows the old ID")
	_, err = d.Wait(ctxWait(t))
	require.NoError(t, err)
	require.Equal(t, "s1", second.next(t).MessageID)
}
