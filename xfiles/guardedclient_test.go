package xfiles_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/xfiles"
)

// TestGuardedClient_RefusesInternalUnlessTrustedAndNoEnvProxy: the
// guarded client refuses a loopback server, reaches it once its
// host:port is trusted, refuses a redirect from it to another loopback
// port, and drops its transport's proxy (the default transport's is the
// environment's; a proxy would resolve the name out of the guard's
// sight): a name only the proxy could reach is not reached.
func TestGuardedClient_RefusesInternalUnlessTrustedAndNoEnvProxy(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("other")) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	proxied := false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { proxied = true }))
	defer proxy.Close()
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	host := mustHost(t, srv.URL)
	var c *http.Client

	get := func(c *http.Client, path string) error {
		resp, err := c.Get(srv.URL + path)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	c, err = xfiles.GuardedClient(nil)
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	require.ErrorIs(t, get(c, "/"), xfiles.ErrRefusedURL, "a loopback address, untrusted")

	c, err = xfiles.GuardedClient(&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}, host)
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	require.NoError(t, get(c, "/"))
	require.ErrorIs(t, get(c, "/away"), xfiles.ErrRefusedURL, "a redirect to an untrusted loopback port")
	if resp, err := c.Get("http://files.invalid/x"); err == nil {
		_ = resp.Body.Close()
	}
	require.False(t, proxied, "the transport's proxy was used")
}

func mustHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	_, _, err = net.SplitHostPort(u.Host)
	require.NoError(t, err)
	return u.Host
}
