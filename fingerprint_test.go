package imv2

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestFingerprintOf_Golden pins the fingerprint bytes: durable completed
// stores (boltstore, pgstore) keep them across upgrades, so an
// implementation change must not move them. The legacy values were
// computed by the streaming implementation before the versioned encoding
// (S6: text and each file's type, ref, name, MIME type and size), and
// fingerprint(m, true) must still reproduce them, since sameContent takes
// records stored by that version.
func TestFingerprintOf_Golden(t *testing.T) {
	cases := []struct {
		m            ChatMessage
		want, legacy string
	}{
		{ChatMessage{MessageID: "m", Text: "héllo\x00", CreatedAt: 5, Files: []File{
			{Type: FileImage, FileRef: "f", Filename: "n.png", MimeType: "image/png", ByteSize: 5, ExpiresAt: -1, DownloadURL: "/x"},
			{Type: FileFile, FileRef: "g"}}},
			"762d9be3fa0c6365d8a184fc843de4c4f491d7295d9129bae6f44ee5c687f0b3",
			"d2fd527b75d0787525c37c0b5512055d2dbcae1cf36f57046d588bf8862a7d7a"},
		// Larger than the stack buffer.
		{ChatMessage{Text: strings.Repeat("\x00", 2000)},
			"0f77143a4ffd9dd5c8e99a12c44a8dd4fe08bad00525fc548bad5e46661ee874",
			"61d864ecac04788ba5139ddf7145a7923ada9ef547352a14d4e0377adf18123e"},
	}
	for _, c := range cases {
		fp := FingerprintOf(&c.m)
		if got := hex.EncodeToString(fp[:]); got != c.want {
			t.Errorf("FingerprintOf(%.40q…) = %s, want %s", c.m.Text, got, c.want)
		}
		old := fingerprint(&c.m, true)
		if got := hex.EncodeToString(old[:]); got != c.legacy {
			t.Errorf("legacy fingerprint(%.40q…) = %s, want %s", c.m.Text, got, c.legacy)
		}
		if !sameContent(fp, &c.m) || !sameContent(old, &c.m) {
			t.Errorf("sameContent refuses the current or the legacy fingerprint of %.40q…", c.m.Text)
		}
	}
}
