package connector

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/xagentkit/imv2"
)

// TestCleanFilename_T1_Table cleans every filename of
// testdata/filenames.txt: paths, C0/C1 controls, and the format characters
// (Unicode Cf: bidi overrides such as U+202E, zero-width characters, the
// BOM, tags) that are not controls but change how a name reads.
func TestCleanFilename_T1_Table(t *testing.T) {
	f, err := os.Open("testdata/filenames.txt")
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
		in, rest, err := unquotePrefix(text)
		if err != nil {
			t.Fatalf("filenames.txt:%d: %v", line, err)
		}
		want, err := strconv.Unquote(strings.TrimSpace(rest))
		if err != nil {
			t.Fatalf("filenames.txt:%d: expected: %v", line, err)
		}
		got := cleanFilename(in)
		if got != want {
			t.Errorf("filenames.txt:%d: cleanFilename(%q) = %q, want %q", line, in, got, want)
		}
		for _, r := range got {
			if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) || r == utf8.RuneError {
				t.Errorf("filenames.txt:%d: %q kept %U", line, got, r)
			}
		}
		if len(got) > imv2.MaxFilenameBytes {
			t.Errorf("filenames.txt:%d: %d bytes", line, len(got))
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 40 {
		t.Fatalf("only %d filenames in the table", n)
	}
}

// unquotePrefix unquotes the Go string literal s starts with and returns
// what follows it.
func unquotePrefix(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	v, err := strconv.Unquote(q)
	return v, s[len(q):], err
}
