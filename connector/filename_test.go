package connector

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/tabletest"
)

// TestCleanFilename_T1_Table cleans every filename of
// testdata/filenames.txt: paths, C0/C1 controls, and the format characters
// (Unicode Cf: bidi overrides such as U+202E, zero-width characters, the
// BOM, tags) that are not controls but change how a name reads.
func TestCleanFilename_T1_Table(t *testing.T) {
	for _, l := range tabletest.Lines(t, "testdata/filenames.txt", 40) {
		in, want := l.Pair(t)
		got := cleanFilename(in)
		if got != want {
			t.Errorf("%s: cleanFilename(%q) = %q, want %q", l.Pos, in, got, want)
		}
		for _, r := range got {
			if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) || r == utf8.RuneError {
				t.Errorf("%s: %q kept %U", l.Pos, got, r)
			}
		}
		if n := utf8.RuneCountInString(got); n > imv2.MaxFilenameChars {
			t.Errorf("%s: %d characters", l.Pos, n)
		}
	}
}
