package xfiles

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xagentkit/imv2/internal/tabletest"
)

// TestAddrClass_T4_SpecialPurposeTable classifies every address of
// testdata/addrclass.txt: each range of the IANA special-purpose registries
// and the IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64,
// 6to4, Teredo), with public neighbours on either side of the ranges.
func TestAddrClass_T4_SpecialPurposeTable(t *testing.T) {
	for _, l := range tabletest.Lines(t, "testdata/addrclass.txt", 100) {
		text, _, _ := strings.Cut(l.Text, "#")
		fields := strings.Fields(text)
		if len(fields) != 2 {
			t.Fatalf("%s: want \"address class\", got %q", l.Pos, l.Text)
		}
		ip, err := netip.ParseAddr(fields[0])
		if err != nil {
			t.Fatalf("%s: %v", l.Pos, err)
		}
		if got := addrClass(ip); got != fields[1] {
			t.Errorf("%s: %s is %q, want %q", l.Pos, fields[0], got, fields[1])
		}
		if got, want := internalAddr(ip), fields[1] != classPublic; got != want {
			t.Errorf("%s: internalAddr(%s) = %v", l.Pos, fields[0], got)
		}
	}
}

// FuzzAddrClass checks the classifier on any 16 bytes: it names a class,
// an IPv4 address and its IPv4-mapped form agree, and a NAT64 or 6to4
// address embedding an internal IPv4 address is internal.
func FuzzAddrClass(f *testing.F) {
	for _, s := range []string{"::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a00:1::", "2001::1", "2606:4700::1", "fe80::1"} {
		b := netip.MustParseAddr(s).As16()
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) < 16 {
			return
		}
		ip := netip.AddrFrom16([16]byte(raw[:16]))
		if addrClass(ip) == "" {
			t.Fatalf("%s has no class", ip)
		}
		v4 := netip.AddrFrom4([4]byte(raw[12:16]))
		if a, b := addrClass(v4), addrClass(netip.AddrFrom16(v4.As16())); a != b {
			t.Fatalf("%s is %q but its mapped form %q", v4, a, b)
		}
		if internalAddr(v4) {
			var n [16]byte
			copy(n[:], netip.MustParseAddr("64:ff9b::").AsSlice())
			copy(n[12:], raw[12:16])
			if !internalAddr(netip.AddrFrom16(n)) {
				t.Fatalf("NAT64 form of internal %s is public", v4)
			}
			s := [16]byte{0x20, 0x02}
			copy(s[2:6], raw[12:16])
			copy(s[6:], raw[:10])
			if !internalAddr(netip.AddrFrom16(s)) {
				t.Fatalf("6to4 form of internal %s is public", v4)
			}
		}
	})
}
