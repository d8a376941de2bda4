package consolebridge

import (
	"testing"
	"unicode/utf8"

	"github.com/xagentkit/imv2/internal/tabletest"
)

// TestTermFilter_Table removes the control sequences of
// testdata/terminal.txt: CSI, OSC, DCS/SOS/PM/APC, two-character ESC
// sequences, their 8-bit C1 forms, the other C0 and C1 controls; newline
// and tab are kept.
func TestTermFilter_Table(t *testing.T) {
	for _, l := range tabletest.Lines(t, "testdata/terminal.txt", 40) {
		in, want := l.Pair(t)
		if got := cleanTerm(in); got != want {
			t.Errorf("%s: cleanTerm(%q) = %q, want %q", l.Pos, in, got, want)
		}
		checkSplits(t, in)
	}
}

// checkSplits: cut anywhere at a rune boundary, as deltas cut text, the
// filter prints the same as for the whole, and never a control.
func checkSplits(t *testing.T, s string) {
	t.Helper()
	whole := cleanTerm(s)
	for i := range len(s) + 1 {
		if i < len(s) && !utf8.RuneStart(s[i]) {
			continue
		}
		var f termFilter
		if got := f.clean(s[:i]) + f.clean(s[i:]); got != whole {
			t.Fatalf("%q cut at %d prints %q, whole %q", s, i, got, whole)
		}
	}
	for _, r := range whole {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			t.Fatalf("cleanTerm(%q) = %q keeps %U", s, whole, r)
		}
	}
}

func FuzzTermFilter(f *testing.F) {
	for _, s := range []string{"\x1b[31mred", "\x1b]0;t\x07x", "\u009b1m", "a\x1bPq\x1b\\b", "\x1b\x1b]", "\r\n\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkSplits(t, s) })
}
