package connector_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
)

// Limits of the HTTP side, named by what they bound; the upload size is
// TestFiles_T1_OverSizeCapIs413 and the store caps TestMemoryFileStore_T1_Caps.

// serve runs srv on a loopback listener and returns its address.
func serve(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

// waitClosed reads from c until the server closes it, failing after wait.
func waitClosed(t *testing.T, c net.Conn) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept a slow client's connection open")
	}
	return string(b)
}

// TestLimit_SlowClientHeaders: NewServer bounds reading request headers, so
// a client that never finishes them (slowloris) is disconnected. The
// bound is shortened here; its default is ServerReadHeaderTimeout.
func TestLimit_SlowClientHeaders(t *testing.T) {
	h := newEnv(t, nil).h
	srv := connector.NewServer("127.0.0.1:0", h)
	require.Equal(t, connector.ServerReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.Positive(t, srv.ReadTimeout)
	require.Positive(t, srv.IdleTimeout)
	srv.ReadHeaderTimeout = 200 * time.Millisecond
	addr := serve(t, srv)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	require.NoError(t, err)
	waitClosed(t, c)

	// A normal client is served by the same server.
	res, err := http.Get("http://" + addr + "/connector-card.json")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

// TestLimit_SlowUploadBody: an upload whose body stalls is cut after
// HandlerConfig.UploadTimeout and nothing is stored.
func TestLimit_SlowUploadBody(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) { c.UploadTimeout = 200 * time.Millisecond })
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	head := "POST /files/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testKey + "\r\n" +
		connector.HeaderChannelID + ": cch_1\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nsome bytes then silence"
	_, err = io.WriteString(c, head)
	require.NoError(t, err)
	out := waitClosed(t, c)
	if out != "" { // the handler may answer before the connection goes
		res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	}
	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Zero(t, n, "a cut upload stores nothing")
}

// TestLimit_SlowDownloadReader: a download whose reader stalls is cut after
// HandlerConfig.DownloadTimeout; the client sees a short body, never a hang.
func TestLimit_SlowDownloadReader(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) {
		c.DownloadTimeout = 200 * time.Millisecond
		c.MaxUploadBytes = 24 << 20
	})
	big := strings.Repeat("d", 24<<20) // more than the socket buffers hold
	f, err := e.h.OfferFile(context.Background(), "cch_1", "big.bin", "application/octet-stream", strings.NewReader(big))
	require.NoError(t, err)
	res, err := http.Get(e.srv.URL + f.DownloadURL)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	buf := make([]byte, 1024)
	_, err = io.ReadFull(res.Body, buf)
	require.NoError(t, err)
	time.Sleep(600 * time.Millisecond) // the stalled reader: a slow client, not a timed assertion
	n, err := io.Copy(io.Discard, res.Body)
	require.Error(t, err, "the body was cut")
	assert.Less(t, n+int64(len(buf)), int64(len(big)))
}
