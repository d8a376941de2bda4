package connector_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/protocol"
)

// slowBody opens a loopback connection to addr and sends a request whose
// chunked body will never end: the headers, then one chunk of one byte.
func slowBody(t *testing.T, addr, method, path, auth string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	head := method + " " + path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" +
		connector.HeaderChannelID + ": cch_1\r\nContent-Type: multipart/form-data; boundary=b\r\n"
	if auth != "" {
		head += "Authorization: " + auth + "\r\n"
	}
	_, err = io.WriteString(c, head+"\r\n1\r\n-\r\n")
	require.NoError(t, err)
	return c
}

// TestAttack_RefusedSlowBodyClosesConnection (finding 4): a request with a
// body sent a byte at a time gets its answer and then loses the connection
// at once, whether it was refused (401 on every keyed endpoint) or served
// without reading the body (the public card). It used to be drained for up
// to 256 KiB after the answer, which at one byte at a time held the
// connection until the 5-minute read timeout.
func TestAttack_RefusedSlowBodyClosesConnection(t *testing.T) {
	e := newEnv(t, nil)
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	for _, tc := range []struct {
		method, path, auth string
		status             int
	}{
		{http.MethodPost, "/files/uploads", "", http.StatusUnauthorized},
		{http.MethodPost, "/files/uploads", "Bearer wrong", http.StatusUnauthorized},
		{http.MethodGet, "/ws", "", http.StatusUnauthorized},
		{http.MethodGet, "/health", "", http.StatusUnauthorized},
		{http.MethodGet, "/files/refs/file_0123456789abcdef0123?sig=x", "", http.StatusForbidden},
		{http.MethodGet, "/connector-card.json", "", http.StatusOK},
		{http.MethodPost, "/connector-card.json", "", http.StatusMethodNotAllowed},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			c := slowBody(t, addr, tc.method, tc.path, tc.auth)
			out := waitClosed(t, c) // fails if the server still holds the connection
			res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
			require.NoError(t, err)
			assert.Equal(t, tc.status, res.StatusCode)
			assert.True(t, res.Close, "the answer says Connection: close")
		})
	}
}

// capEnv serves a Handler whose /ws is a real data plane through
// NewServerLimits on a loopback listener.
func capEnv(t *testing.T, lim connector.ServerLimits) (addr string) {
	t.Helper()
	ws, err := dataplane.NewServer(dataplane.ServerConfig{
		Card: testCard(),
		NewTarget: func(string) imv2.Target {
			return imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	h, err := connector.NewHandler(connector.HandlerConfig{Card: testCard(), APIKey: testKey, WS: ws})
	require.NoError(t, err)
	return serve(t, connector.NewServerLimits("127.0.0.1:0", h, lim))
}

// dialWS dials /ws with the key and reports the handshake's status.
func dialWS(t *testing.T, addr string) int {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+testKey)
	d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}, HandshakeTimeout: 5 * time.Second}
	c, res, err := d.Dial("ws://"+addr+"/ws", h)
	if err != nil && res == nil {
		t.Logf("ws dial: %v", err)
		return 0
	}
	_ = res.Body.Close()
	if c != nil {
		_ = c.Close()
	}
	return res.StatusCode
}

// slowHeaders opens a connection that sends part of a request's headers
// and then nothing: held by net/http until ReadHeaderTimeout (10 s).
func slowHeaders(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = io.WriteString(c, "GET /connector-card.json HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	require.NoError(t, err)
	return c
}

// TestAttack_ConnectionCapsKeepTheKeyHolderIn (finding 4): against a server
// capped at 8 connections, 4 of them unauthenticated, 64 slow chunked
// bodies without the key are each answered 401 and closed (or closed
// unanswered when they arrive while the unauthenticated slots are full), 64 connections
// that never finish their headers hold at most 4 slots between them, and
// then the card fetch and an authenticated /ws dial still work, and an
// authenticated keep-alive connection opened before a second flood is
// still the one reused after it.
func TestAttack_ConnectionCapsKeepTheKeyHolderIn(t *testing.T) {
	const unauthCap = 4
	addr := capEnv(t, connector.ServerLimits{MaxConns: 8, MaxUnauthConns: unauthCap})

	bodies := make([]net.Conn, 64)
	for i := range bodies {
		bodies[i] = slowBody(t, addr, http.MethodPost, "/files/uploads", "")
	}
	answered := 0
	for _, c := range bodies {
		// Each is answered 401 and closed, or closed unanswered when it
		// arrived while the unauthenticated slots were full: none is held.
		if out := waitClosed(t, c); out != "" {
			res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
			answered++
		}
	}
	t.Logf("%d of %d slow bodies answered 401, the rest closed unanswered; none held", answered, len(bodies))

	heads := make([]net.Conn, 64)
	for i := range heads {
		heads[i] = slowHeaders(t, addr)
	}
	// Every one but the newest unauthCap was closed to make room.
	for _, c := range heads[:len(heads)-unauthCap] {
		assert.Empty(t, waitClosed(t, c), "closed unanswered")
	}

	res, err := http.Get("http://" + addr + "/connector-card.json")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode, "the card fetch")
	assert.Equal(t, http.StatusSwitchingProtocols, dialWS(t, addr), "the authenticated /ws dial")

	// An authenticated idle connection is never what makes room.
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	health := func() (reused bool) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/health", nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		}))
		res, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		return reused
	}
	health()
	for range 64 {
		slowHeaders(t, addr)
	}
	assert.True(t, health(), "the keyed keep-alive connection survived the flood")
}

// deadlineConn records the read deadlines set on a connection.
type deadlineConn struct {
	net.Conn
	set chan<- time.Time
}

func (c deadlineConn) SetReadDeadline(d time.Time) error {
	if !d.IsZero() {
		c.set <- d
	}
	return c.Conn.SetReadDeadline(d)
}

// deadlineListener wraps every accepted connection in a deadlineConn.
type deadlineListener struct {
	net.Listener
	set chan<- time.Time
}

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return deadlineConn{c, l.set}, nil
}

// TestAttack_SmallStalledUploadCutInProportion (finding 4): an upload's
// read deadline is in proportion to its declared size, so a 1 KB body that
// stalls is cut after the share of a 1 MiB body (about 2 s of a 64 s
// UploadTimeout), not after the whole timeout. No wall time is measured:
// the Handler's network clock is pinned an hour back, so the deadline it
// sets on the connection is seen exactly, lies in the past, and the real
// connection's read fails at once — the stalled upload is cut and nothing
// is stored.
func TestAttack_SmallStalledUploadCutInProportion(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) { c.UploadTimeout = 64 * time.Second })
	pinned := time.Now().Add(-time.Hour)
	connector.SetNetNow(e.h, func() time.Time { return pinned })
	set := make(chan time.Time, 16)
	srv := httptest.NewUnstartedServer(e.h)
	srv.Listener = deadlineListener{srv.Listener, set}
	srv.Start()
	t.Cleanup(srv.Close)

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /files/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testKey+"\r\n"+
		connector.HeaderChannelID+": cch_1\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000\r\n\r\n"+
		"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nthen silence")
	require.NoError(t, err)
	share := testwait.Recv(t, (<-chan time.Time)(set), 20*time.Second).Sub(pinned)
	// 1 MiB of 32 MiB + 64 KiB form overhead, of 64 s: 1.996 s.
	assert.Greater(t, share, 1990*time.Millisecond, "at least 1 MiB's share")
	assert.Less(t, share, 2*time.Second, "in proportion, not the whole UploadTimeout")
	// The deadline passed: the connection ends (the guard only stops a hang).
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	out, err := io.ReadAll(c)
	require.NoError(t, err, "the connection was not closed")
	if len(out) > 0 { // the handler may answer before the connection goes
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	}
	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Zero(t, n, "a cut upload stores nothing")
}
