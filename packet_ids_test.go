package imv2

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestIDs_M2_CanonicalUUIDv4: packet and message IDs are the prefix and a
// canonical random (version 4, RFC 4122 variant) UUID, as prefix +
// uuid.NewString() gave before prefixedUUID formatted them itself.
func TestIDs_M2_CanonicalUUIDv4(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range []struct {
		prefix string
		id     func() string
	}{
		{"pkt_", NewPacketID},
		{"msg_", NewMessageID},
		{"msg_", func() string { m, _ := newMessageAndPacketID(); return m }},
		{"pkt_", func() string { _, p := newMessageAndPacketID(); return p }},
	} {
		for range 100 {
			id := c.id()
			rest, ok := strings.CutPrefix(id, c.prefix)
			u, err := uuid.Parse(rest)
			if !ok || err != nil || u.String() != rest || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
				t.Fatalf("%q is not %s and a canonical UUIDv4 (%v)", id, c.prefix, err)
			}
			if seen[id] {
				t.Fatalf("%q minted twice", id)
			}
			seen[id] = true
		}
	}
}

// BenchmarkNewPacketID: one ID, against the crypto/rand draw it used.
func BenchmarkNewPacketID(b *testing.B) {
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewPacketID()
		}
	})
	b.Run("crypto-rand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = "pkt_" + uuid.NewString()
		}
	})
}
