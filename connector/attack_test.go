package connector_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
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
