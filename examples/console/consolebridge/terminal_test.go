package consolebridge

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTermFilter_Table removes the control sequences of
// testdata/terminal.txt: CSI, OSC, DCS/SOS/PM/APC, two-character ESC
// sequences, their 8-bit C1 forms, the other C0 and C1 controls; newline
// and tab are kept.
func TestTermFilter_Table(t *testing.T) {
	f, err := os.Open("testdata/terminal.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		q, err := strconv.QuotedPrefix(text)
		if err != nil {
			t.Fatalf("terminal.txt:%d: %v", line, err)
		}
		in, _ := strconv.Unquote(q)
		want, err := strconv.Unquote(strings.TrimSpace(text[len(q):]))
		if err != nil {
			t.Fatalf("terminal.txt:%d: expected: %v", line, err)
		}
		if got := cleanTerm(in); got != want {
			t.Errorf("terminal.txt:%d: cleanTerm(%q) = %q, want %q", line, in, got, want)
		}
		checkSplits(t, in)
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 40 {
		t.Fatalf("only %d cases", n)
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
