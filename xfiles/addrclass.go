package xfiles

import "net/netip"

// classPublic is the class of an address Fetch may dial.
const classPublic = "public"

// specialRange is one range of the IANA special-purpose address registries
// (IPv4 and IPv6, RFC 6890 and its updates) or of the address space
// registries (multicast, reserved), with the class Fetch refuses it as.
type specialRange struct {
	prefix netip.Prefix
	class  string
}

// special4 lists every IPv4 range no file may be fetched from. The few
// registry entries marked globally reachable (AS112, AMT, PCP and TURN
// anycast in 192.0.0.0/24) are refused as well: they serve no files, and a
// Connector has no business pointing xAgent at them. More specific ranges
// come first.
var special4 = []specialRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared"}, // carrier-grade NAT
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"}, // cloud metadata
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "ietf-protocol"}, // DS-Lite, PCP, TURN, NAT64 discovery …
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.31.196.0/24"), "as112"},
	{netip.MustParsePrefix("192.52.193.0/24"), "amt"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4-relay"}, // deprecated anycast
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("192.175.48.0/24"), "as112"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// special6 lists the IPv6 ranges refused outright; anything outside the
// global unicast space 2000::/3 is refused as "reserved" besides. The
// forms that embed an IPv4 address a translator or relay would reach
// (IPv4-mapped, NAT64 64:ff9b::/96, 6to4) are classified by that address
// instead (addrClass). More specific ranges come first.
var special6 = []specialRange{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "ipv4-compatible"}, // deprecated; some stacks route it to the IPv4 address
	{netip.MustParsePrefix("64:ff9b:1::/48"), "nat64-local"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("100:0:0:1::/64"), "dummy"},
	{netip.MustParsePrefix("2001::/32"), "teredo"}, // embeds a server and an obfuscated client IPv4
	{netip.MustParsePrefix("2001::/23"), "ietf-protocol"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2620:4f:8000::/48"), "as112"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("5f00::/16"), "srv6-sid"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// addrClass returns classPublic for an address Fetch may dial, else the
// name of the special-purpose range ip falls in. An IPv6 address that
// embeds an IPv4 address (IPv4-mapped, NAT64 well-known prefix, 6to4) is
// as internal as the address it embeds: "nat64(loopback)" for
// 64:ff9b::127.0.0.1.
func addrClass(ip netip.Addr) string {
	ip = ip.WithZone("")
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.Is4In6():
		return class4(ip.Unmap())
	case ip.Is4():
		return class4(ip)
	case nat64WellKnown.Contains(ip):
		b := ip.As16()
		return embedded("nat64", netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		b := ip.As16()
		return embedded("6to4", netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, r := range special6 {
		if r.prefix.Contains(ip) {
			return r.class
		}
	}
	if !globalUnicast6.Contains(ip) {
		return "reserved"
	}
	return classPublic
}

func class4(ip netip.Addr) string {
	for _, r := range special4 {
		if r.prefix.Contains(ip) {
			return r.class
		}
	}
	return classPublic
}

// embedded classifies an address by the IPv4 address v4 it embeds.
func embedded(form string, v4 netip.Addr) string {
	if c := class4(v4); c != classPublic {
		return form + "(" + c + ")"
	}
	return classPublic
}

// internalAddr reports whether ip is an address a Connector may not make
// xAgent fetch from.
func internalAddr(ip netip.Addr) bool { return addrClass(ip) != classPublic }
