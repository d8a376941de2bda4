package xfiles

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/xagentkit/imv2"
)

// A download_url comes from the Connector, which is not trusted with the
// xAgent host's network: an absolute URL (or a redirect) must not reach
// loopback, private, link-local (cloud metadata) or otherwise internal
// addresses. The Connector's own host — the catalog base URL — is exempt,
// since relative URLs resolve against it anyway.

// internalAddr reports whether ip is an address a Connector may not make
// xAgent fetch from.
func internalAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip) // carrier-grade NAT
}

// guardTransport returns rt dialing only public addresses, except
// baseHost (host:port of the Connector base URL). rt must be nil (the
// default transport) or an *http.Transport; other RoundTripper types
// cannot be guarded at dial time and are refused.
func guardTransport(rt http.RoundTripper, baseHost string) (http.RoundTripper, error) {
	var t *http.Transport
	switch v := rt.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = v.Clone()
	default:
		return nil, fmt.Errorf("xfiles: cannot guard a %T against internal addresses; use an *http.Transport", rt)
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == baseHost {
			return dialer.DialContext(ctx, network, addr)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		for _, ip := range ips {
			if internalAddr(ip) {
				return nil, imv2.Permanent(fmt.Errorf("%w: %s resolves to internal address %s", ErrRefusedURL, host, ip))
			}
		}
		// Dial the address checked, not a second lookup's answer.
		return dialer.DialContext(ctx, network, net.JoinHostPort(ips[0].String(), port))
	}
	return t, nil
}
