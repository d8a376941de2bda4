package xfiles

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
)

// A download_url comes from the Connector, which is not trusted with the
// xAgent host's network: an absolute URL (or a redirect) must not reach
// loopback, private, link-local (cloud metadata) or any other
// special-purpose address (addrclass.go). The Connector's own host — the
// catalog base URL — is exempt, since relative URLs resolve against it
// anyway.
//
// The check sits where the address is final: at the dial, after our own
// lookup, and the checked address is the one dialed (no second lookup a
// rebinding DNS answer could change). A proxy resolves the name itself,
// out of our sight, so by default Fetch uses no proxy at all — not the
// transport's, not the environment's; FetchRequest.AllowProxy opts in and
// checks the target's addresses before the request goes to the proxy.

// guard is the dial-time check of one Fetch.
type guard struct {
	trusted map[string]bool // host:port dialed unchecked: the Connector base URL's (Fetch), trusted ones (GuardedClient)

	mu      sync.Mutex
	proxies map[string]bool // host:port of proxies the caller's transport chose (AllowProxy)
}

// exempt reports whether addr may be dialed unchecked: the Connector, or a
// proxy the caller configured.
func (g *guard) exempt(addr string) bool {
	if g.trusted[addr] {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proxies[addr]
}

// resolve looks addr's host up and returns host:port of the first address
// if every address is public, else ErrRefusedURL.
func (g *guard) resolve(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("xfiles: %s has no address", host)
	}
	for _, ip := range ips {
		if c := addrClass(ip); c != classPublic {
			return "", imv2.Refused(fmt.Errorf("%w: %s resolves to %s address %s", ErrRefusedURL, host, c, ip))
		}
	}
	return net.JoinHostPort(ips[0].WithZone("").String(), port), nil
}

// guardTransport returns rt dialing only public addresses, except the
// host:ports in exempt (the Connector base URL's). rt must be nil (the default
// transport) or an *http.Transport. Its DialContext (or Dial) is kept and
// wrapped: it is handed the checked IP address, never the name. A
// transport with DialTLSContext or DialTLS is refused: those dial by name
// and do the TLS handshake themselves, so the guard could neither check
// the address they reach nor hand them one without breaking certificate
// verification. The proxy is dropped unless allowProxy.
func guardTransport(rt http.RoundTripper, exempt []string, allowProxy bool) (http.RoundTripper, error) {
	var t *http.Transport
	switch v := rt.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		//lint:ignore SA1019 DialTLS is deprecated but net/http still uses it
		if v.DialTLSContext != nil || v.DialTLS != nil {
			return nil, fmt.Errorf("%w: it sets DialTLSContext or DialTLS; set DialContext and TLSClientConfig instead", ErrUnguardableTransport)
		}
		t = v.Clone()
	default:
		return nil, fmt.Errorf("%w: a %T; use an *http.Transport", ErrUnguardableTransport, rt)
	}
	dial := t.DialContext
	//lint:ignore SA1019 the deprecated Dial is the caller's dialer too
	if d := t.Dial; dial == nil && d != nil {
		dial = func(_ context.Context, network, addr string) (net.Conn, error) { return d(network, addr) }
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	//lint:ignore SA1019 replaced by the guarded DialContext
	t.Dial = nil
	g := &guard{trusted: map[string]bool{}, proxies: map[string]bool{}}
	for _, h := range exempt {
		g.trusted[h] = true
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if g.exempt(addr) {
			return dial(ctx, network, addr)
		}
		checked, err := g.resolve(ctx, addr)
		if err != nil {
			return nil, err
		}
		return dial(ctx, network, checked)
	}
	proxy := t.Proxy
	t.Proxy = nil
	if allowProxy && proxy != nil {
		t.Proxy = func(req *http.Request) (*url.URL, error) {
			p, err := proxy(req)
			if err != nil || p == nil {
				return p, err
			}
			// The proxy will resolve the target itself; check it here
			// first. A DNS answer that changes between the two lookups is
			// the proxy's to stop (AllowProxy's documented limit).
			if target := hostPort(req.URL); !g.trusted[target] {
				if _, err := g.resolve(req.Context(), target); err != nil {
					return nil, err
				}
			}
			g.mu.Lock()
			g.proxies[proxyHostPort(p)] = true // the caller's own configuration
			g.mu.Unlock()
			return p, nil
		}
	}
	return t, nil
}

// proxyHostPort is the address the transport dials for proxy p.
func proxyHostPort(p *url.URL) string {
	if p.Port() != "" {
		return p.Host
	}
	switch p.Scheme {
	case "https":
		return net.JoinHostPort(p.Hostname(), "443")
	case "socks5", "socks5h":
		return net.JoinHostPort(p.Hostname(), "1080")
	}
	return net.JoinHostPort(p.Hostname(), "80")
}
