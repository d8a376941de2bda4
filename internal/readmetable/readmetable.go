// Package readmetable reads the README's "Default limits" table, so each
// package that owns a row checks its figures against its own constants.
package readmetable

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Figure is a number in the README's prose, with its unit if it has one:
// "1,000", "0.5 s", "5 min", "1 MiB", "255 bytes", the "3" of "3 ×".
var Figure = regexp.MustCompile(`\d+(?:[.,]\d+)*(?: (?:MiB|KiB|bytes|min|ms|h|s)\b)?`)

// Rows returns the rows of the "Default limits" table of the README at
// path: the limit column to the limit and default columns joined.
func Rows(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, table, ok := strings.Cut(string(b), "\n## Default limits\n")
	if !ok {
		return nil, fmt.Errorf(`%s has no "## Default limits" section`, path)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(cells[1], "---") || strings.TrimSpace(cells[1]) == "limit" {
			continue
		}
		label := strings.TrimSpace(cells[1])
		rows[label] = label + " | " + strings.TrimSpace(cells[2])
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: the Default limits table has no rows", path)
	}
	return rows, nil
}

// Elsewhere names the rows another package than the root checks, by
// label: the root's test skips them, the owner checks them with Check.
var Elsewhere = map[string]string{
	"connector_id slots (xAgent sessions) per Connector":  "dataplane",
	"tool-call replay answers":                            "dataplane",
	"upload room per connector_id (built-in file stores)": "connector",
	"upload bodies read at once per connector_id":         "connector",
}

// Check returns an error for a row whose figures are not want.
func Check(rows map[string]string, label string, want []string) error {
	cells, ok := rows[label]
	if !ok {
		return fmt.Errorf("README has no row %q", label)
	}
	got := Figure.FindAllString(cells, -1)
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		return fmt.Errorf("README row %q says %q; the constants give %q", label, got, want)
	}
	return nil
}

// Count writes n as the README does: 1,000 and 100,000.
func Count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Dur writes d as the README does: 1 h, 5 min, 60 s, 0.5 s.
func Dur(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%g s", d.Seconds())
}

// Size writes n bytes as the README does: 1 MiB, 896 KiB, 255 bytes.
func Size(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
