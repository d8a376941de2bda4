//go:build unix

package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/sim"
)

// hits is an HTTP server that counts its requests and serves bytes.
type hits struct {
	*httptest.Server
	n atomic.Int64
}

func newHits(t *testing.T, h http.HandlerFunc) *hits {
	s := &hits{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.n.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestDownload_EveryHopOnTheGuard: alice shares file URLs the bridge
// must not fetch. (1) An allowed host that redirects to another host:
// the hop is refused, the other host never asked, xAgent gets the URL as
// text. (2) With the default guard, an allowed host whose address is
// loopback: refused before any dial. (3) An allowed host only a proxy
// can reach, with the client's transport set to use a proxy (as the
// default transport does from HTTP_PROXY): the proxy is never used.
// Before: the redirect was followed (the other host's bytes reached
// xAgent as the file), loopback was fetched, the proxy used.
func TestDownload_EveryHopOnTheGuard(t *testing.T) {
	secret := newHits(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("internal secret")) })
	allowed := newHits(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, secret.URL+"/metadata", http.StatusFound)
	})
	proxy := newHits(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("via the proxy")) })
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	allowedHost := strings.TrimPrefix(allowed.URL, "http://")

	for _, c := range []struct {
		name    string
		private bool
		url     string
	}{
		{"redirect off the file hosts", true, allowed.URL + "/file.txt"},
		{"loopback file host, default guard", false, allowed.URL + "/file.txt"},
		{"a proxy configured", true, "http://files.invalid/file.txt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startProsody(t)
			alice := newUser(t, p)
			addr := freeAddr(t)
			conn := startConnector(t, p, addr, aliceJID, "", nil, func(cfg *xmppbridge.Config) {
				cfg.FileHosts, cfg.PrivateFileHosts = []string{p.http, allowedHost, "files.invalid"}, c.private
				cfg.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
			})
			defer conn.stop(t)
			ctx := ctxFor(t)
			s, err := sim.Start(ctx, sim.Config{Connector: "http://" + addr, APIKey: apiKey, CardID: xmppbridge.CardID})
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, conn.b.Reading(ctx))

			before := allowed.n.Load()
			url := c.url
			alice.share(botJID, url)
			alice.waitFor("the reply", func() bool { return len(thread(alice.from(botJID))) == 1 })
			s.Wait()
			users := s.UserMessages()
			require.Len(t, users, 1)
			require.Empty(t, users[0].Files, "a file was downloaded")
			require.Equal(t, url, users[0].Text, "forwarded as its URL")
			require.Zero(t, secret.n.Load(), "the redirect's target was asked")
			require.Zero(t, proxy.n.Load(), "the environment's proxy was used")
			if !c.private {
				require.Equal(t, before, allowed.n.Load(), "a loopback address was dialed")
			}
		})
	}
}
