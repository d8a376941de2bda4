package tabletest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLines_SkipsBlanksAndComments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(path, []byte("# head\n\n  \"a\" \"b\"  \n# more\n\"c\\n\" \"d\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := Lines(t, path, 2)
	if len(lines) != 2 || lines[0].Pos != "t.txt:3" || lines[1].Pos != "t.txt:5" {
		t.Fatalf("lines = %+v", lines)
	}
	if in, want := lines[1].Pair(t); in != "c\n" || want != "d" {
		t.Fatalf("Pair = %q %q", in, want)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper()               {}
func (f *fatalRecorder) Fatalf(string, ...any) { f.failed = true }

func TestLines_FailsOnAShortTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(path, []byte("\"a\" \"b\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &fatalRecorder{TB: t}
	Lines(rec, path, 2)
	if !rec.failed {
		t.Fatal("a table with fewer cases than its minimum passed")
	}
}
