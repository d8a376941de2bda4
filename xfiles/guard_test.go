package xfiles_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/xfiles"
)

// newTLSHitServer is an https hitServer answering "secret": an internal
// target.
func newTLSHitServer(t *testing.T) *hitServer {
	s := &hitServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		_, _ = io.WriteString(w, "secret")
	}))
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

const metadataURL = "http://169.254.169.254/latest/meta-data/"

// proxyServer is a loopback forward proxy: it answers every proxied
// request (absolute URI or CONNECT) itself and counts them, so a test sees
// whether a request to an internal target got as far as the proxy.
func proxyServer(t *testing.T) (*hitServer, *atomic.Int64) {
	var proxied atomic.Int64
	s := newHitServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect || r.URL.IsAbs() {
			proxied.Add(1)
			_, _ = io.WriteString(w, "via proxy: "+r.Host)
			return
		}
		_, _ = io.WriteString(w, "connector: "+r.URL.Path)
	})
	return s, &proxied
}

// TestFetch_T4_EnvironmentProxyDoesNotReachInternal: a transport whose
// Proxy is set (as HTTP_PROXY sets http.DefaultTransport's; here via the
// test transport's Proxy func, not the process environment) used to send
// GET http://169.254.169.254/… to the proxy, since the guard checked only
// the proxy's address. The proxy here is the Connector's own host, the one
// address the guard exempts, which is where the old guard let it through.
func TestFetch_T4_EnvironmentProxyDoesNotReachInternal(t *testing.T) {
	s, proxied := proxyServer(t)
	proxyURL, err := url.Parse(s.URL)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	f := imv2.File{Type: "file", FileRef: "f", DownloadURL: metadataURL}

	data, err := xfiles.Fetch(context.Background(), client, s.URL, f, 0)
	assert.ErrorIs(t, err, xfiles.ErrRefusedURL)
	assert.False(t, imv2.SafeToRetry(err))
	assert.Nil(t, data)

	// Opting in to the proxy still checks the target before the proxy sees it.
	q := xfiles.FetchRequest{BaseURL: s.URL, File: f, AllowProxy: true}
	_, err = q.Do(context.Background(), client)
	assert.ErrorIs(t, err, xfiles.ErrRefusedURL, "AllowProxy")
	assert.Zero(t, proxied.Load(), "an internal target reached the proxy")

	// Without AllowProxy a relative URL goes to the Connector directly.
	rel := imv2.File{Type: "file", FileRef: "f", DownloadURL: "/files/refs/x"}
	data, err = xfiles.Fetch(context.Background(), client, s.URL, rel, 0)
	require.NoError(t, err)
	assert.Equal(t, "connector: /files/refs/x", string(data))
	assert.Zero(t, proxied.Load())
}

// TestFetch_T4_AllowProxyUsesTheProxy: with AllowProxy, the Connector's own
// URL goes through the caller's proxy (a separate loopback server: the
// caller's configuration, so its internal address is not refused).
func TestFetch_T4_AllowProxyUsesTheProxy(t *testing.T) {
	connector := newHitServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "direct") })
	proxy, proxied := proxyServer(t)
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	q := xfiles.FetchRequest{BaseURL: connector.URL, File: imv2.File{Type: "file", FileRef: "f", DownloadURL: "/files/refs/x"}, AllowProxy: true}
	data, err := q.Do(context.Background(), client)
	require.NoError(t, err)
	assert.Equal(t, "via proxy: "+connector.Listener.Addr().String(), string(data))
	assert.Equal(t, int64(1), proxied.Load())
	assert.Zero(t, connector.hits.Load())
}

// TestFetch_T4_DialTLSContextTransportGuarded: a transport with its own
// DialTLSContext used to dial https targets past the guard. Such a
// transport is now refused before anything is dialed: the guard cannot
// check what a name-dialing TLS dialer reaches.
func TestFetch_T4_DialTLSContextTransportGuarded(t *testing.T) {
	internal := newTLSHitServer(t)
	connector := newHitServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	var dials atomic.Int64
	tlsConfig := internal.Client().Transport.(*http.Transport).TLSClientConfig
	rt := &http.Transport{DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		d := tls.Dialer{Config: tlsConfig}
		return d.DialContext(ctx, network, addr)
	}}
	f := imv2.File{Type: "file", FileRef: "f", DownloadURL: internal.URL + "/x"}
	_, err := xfiles.Fetch(context.Background(), &http.Client{Transport: rt}, connector.URL, f, 0)
	require.ErrorIs(t, err, xfiles.ErrUnguardableTransport)
	assert.Contains(t, err.Error(), "DialTLSContext")
	assert.False(t, imv2.SafeToRetry(err))
	assert.Zero(t, internal.hits.Load(), "the internal https server was reached")
	assert.Zero(t, dials.Load())
}

// TestFetch_T4_CallerDialContextWrapped: a caller's DialContext is kept,
// behind the guard, and handed the checked address.
func TestFetch_T4_CallerDialContextWrapped(t *testing.T) {
	internal := newTLSHitServer(t)
	connector := newHitServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	var dialed []string
	rt := internal.Client().Transport.(*http.Transport).Clone()
	rt.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	client := &http.Client{Transport: rt}
	for _, u := range []string{internal.URL + "/x", "https://localhost:" + strconv.Itoa(internal.Listener.Addr().(*net.TCPAddr).Port) + "/x"} {
		_, err := xfiles.Fetch(context.Background(), client, connector.URL, imv2.File{Type: "file", FileRef: "f", DownloadURL: u}, 0)
		assert.ErrorIs(t, err, xfiles.ErrRefusedURL, u)
	}
	assert.Zero(t, internal.hits.Load())
	assert.Empty(t, dialed, "refused before the caller's dialer ran")

	data, err := xfiles.Fetch(context.Background(), client, connector.URL, imv2.File{Type: "file", FileRef: "f", DownloadURL: "/x"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(data))
	assert.Equal(t, []string{connector.Listener.Addr().String()}, dialed, "the caller's dialer dials the Connector")
}
