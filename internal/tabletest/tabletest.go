// Package tabletest reads the SDK's line-table test files under testdata/:
// one case per line, blank lines and lines starting with # skipped.
package tabletest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Line is one case of a table: its text, trimmed, and where it stands
// ("filenames.txt:12") for failure messages.
type Line struct {
	Pos  string
	Text string
}

// Lines returns the cases of the table file at path. It fails t when the
// file cannot be read or holds fewer than min cases, so a truncated table
// cannot pass by testing nothing.
func Lines(t testing.TB, path string, min int) []Line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []Line
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		lines = append(lines, Line{Pos: fmt.Sprintf("%s:%d", filepath.Base(path), n), Text: text})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) < min {
		t.Fatalf("%s: only %d cases, want at least %d", path, len(lines), min)
	}
	return lines
}

// Pair reads a case of two Go string literals, "input" "expected".
func (l Line) Pair(t testing.TB) (in, want string) {
	t.Helper()
	q, err := strconv.QuotedPrefix(l.Text)
	if err != nil {
		t.Fatalf("%s: input: %v", l.Pos, err)
	}
	in, _ = strconv.Unquote(q)
	want, err = strconv.Unquote(strings.TrimSpace(l.Text[len(q):]))
	if err != nil {
		t.Fatalf("%s: expected: %v", l.Pos, err)
	}
	return in, want
}
