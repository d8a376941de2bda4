package imv2test

import (
	"bytes"
	"strings"
)

// archive is a txtar archive: a comment, then files introduced by lines
// "-- NAME --". The format is the Go tools' txtar, parsed here in a few
// lines so the package needs no extra module.
type archive struct {
	comment []byte
	files   []archiveFile
}

type archiveFile struct {
	name string
	data []byte
	line int // line of the "-- NAME --" marker, 1-based
}

// parseArchive splits data into its comment and files. It never fails: a
// file without markers is all comment.
func parseArchive(data []byte) *archive {
	a := &archive{}
	var cur *archiveFile
	var buf bytes.Buffer
	flush := func() {
		if cur == nil {
			a.comment = append([]byte(nil), buf.Bytes()...)
		} else {
			cur.data = append([]byte(nil), buf.Bytes()...)
			a.files = append(a.files, *cur)
		}
		buf.Reset()
	}
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if name, ok := fileMarker(line); ok {
			flush()
			cur = &archiveFile{name: name, line: i + 1}
			continue
		}
		buf.WriteString(line)
	}
	flush()
	return a
}

// fileMarker reports whether line is "-- NAME --" and returns NAME.
func fileMarker(line string) (string, bool) {
	line = strings.TrimRight(line, "\r\n")
	rest, ok := strings.CutPrefix(line, "-- ")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, " --")
	if !ok {
		return "", false
	}
	name = strings.TrimSpace(name)
	return name, name != ""
}
