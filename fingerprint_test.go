package imv2

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestFingerprintOf_Golden pins the fingerprint bytes: durable completed
// stores (boltstore) keep them across upgrades, so an implementation
// change (such as hashing one buffer instead of streaming) must not move
// them. The values were computed by the streaming implementation.
func TestFingerprintOf_Golden(t *testing.T) {
	cases := []struct {
		m    ChatMessage
		want string
	}{
		{ChatMessage{MessageID: "m", Text: "héllo\x00", CreatedAt: 5, Files: []File{
			{Type: FileImage, FileRef: "f", Filename: "n.png", MimeType: "image/png", ByteSize: 5, ExpiresAt: -1, DownloadURL: "/x"},
			{Type: FileFile, FileRef: "g"}}},
			"d2fd527b75d0787525c37c0b5512055d2dbcae1cf36f57046d588bf8862a7d7a"},
		// Larger than the stack buffer.
		{ChatMessage{Text: strings.Repeat("\x00", 2000)}, "61d864ecac04788ba5139ddf7145a7923ada9ef547352a14d4e0377adf18123e"},
	}
	for _, c := range cases {
		fp := FingerprintOf(&c.m)
		if got := hex.EncodeToString(fp[:]); got != c.want {
			t.Errorf("FingerprintOf(%.40q…) = %s, want %s", c.m.Text, got, c.want)
		}
	}
}
