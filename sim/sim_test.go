package sim

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestPieces_D2_ConcatenateToText: the deltas of a reply concatenate back to
// its text, and none is empty.
func TestPieces_D2_ConcatenateToText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringMatching(`[a-z ]{0,40}`).Draw(t, "text")
		ps := Pieces(text)
		if strings.Join(ps, "") != text {
			t.Fatalf("%q → %q", text, ps)
		}
		for _, p := range ps {
			if p == "" {
				t.Fatalf("empty piece in %q", ps)
			}
		}
	})
}
