package imv2

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xagentkit/imv2/internal/readmetable"
)

// figure is a number in the README's prose, with its unit if it has one:
// "1,000", "0.5 s", "5 min", "1 MiB", "255 bytes", the "3" of "3 ×".
var figure = regexp.MustCompile(`\d+(?:[.,]\d+)*(?: (?:MiB|KiB|bytes|min|ms|h|s)\b)?`)

// TestREADME_DefaultLimitsMatchTheConstants: the README's "Default limits"
// table is the one place the defaults are listed for a reader; every
// figure in its limit and default columns must be what the constants and
// Options.withDefaults give, and every row must be checked here.
func TestREADME_DefaultLimitsMatchTheConstants(t *testing.T) {
	o := (&Options{}).withDefaults()
	want := map[string][]string{
		"pending messages per channel":                                         {count(DefaultPendingCap)},
		"pending age, connected or not (a negative `PendingTTL` turns it off)": {dur(o.PendingTTL)},
		"ack timeout / backoff":                                                {dur(o.AckTimeout), dur(o.RetryMin), dur(o.RetryMax)},
		"sent messages awaiting an ack per channel":                            {count(o.MaxUnacked)},
		"Target call": {dur(o.TargetTimeout)},
		"messages queued for the Target per channel (posted one at a time, in order)":     {count(o.MaxInflight)},
		"resends waiting on one in-flight message":                                        {count(o.MaxWaiters)},
		"hold of a message rejected retryable over the channel's later ones (`OrderTTL`)": {dur(o.OrderTTL), count(o.MaxInflight)},
		"open delta streams per channel":                                                  {count(o.MaxOpenDeltas)},
		"assembled delta text (+8 bytes per delta)":                                       {size(deltaOverhead), size(o.MaxDeltaBytes)},
		"delta stream idle / age (`DeltaIdleTTL`, `DeltaMaxAge`)":                         {dur(o.DeltaIdleTTL), dur(o.DeltaMaxAge), dur(o.DeltaSweep)},
		"completed records": {count(DefaultCompletedCap), dur(DefaultCompletedTTL)},
		"records (and claims) copied by one handover to a new channel ID": {count(MaxHandoverRecords)},
		"claim of a message while its Target runs":                        {count(int(o.ClaimLease / o.TargetTimeout))},
		"activity shown without refresh":                                  {dur(o.ActivityTimeout)},
		"`message_id`, `file_ref`":                                        {size(MaxIDBytes)},
		"message text":                                                    {size(MaxTextBytes)},
		"files per message / filename":                                    {count(MaxFilesPerMessage), count(MaxFilenameChars)},
	}
	rows := readmeLimits(t)
	for label, cells := range rows {
		if readmetable.Elsewhere[label] != "" {
			continue // its package checks it
		}
		w, ok := want[label]
		if !ok {
			t.Errorf("README row %q: no constant checks it; add it here", label)
			continue
		}
		if got := figure.FindAllString(cells, -1); !slices.Equal(got, w) {
			t.Errorf("README row %q says %q; the constants give %q", label, got, w)
		}
	}
	for label := range want {
		if _, ok := rows[label]; !ok {
			t.Errorf("README has no row %q", label)
		}
	}
}

// readmeLimits returns the rows of README.md's "Default limits" table:
// the limit column to the limit and default columns joined.
func readmeLimits(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Default limits\n")
	if !ok {
		t.Fatal(`README.md has no "## Default limits" section`)
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
		t.Fatal("README.md's Default limits table has no rows")
	}
	return rows
}

// count writes n as the README does: 1,000 and 100,000.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// dur writes d as the README does: 1 h, 5 min, 60 s, 0.5 s.
func dur(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%g s", d.Seconds())
}

// size writes n bytes as the README does: 1 MiB, 255 bytes.
func size(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// TestOptions_DocDefaultsMatchTheConstants: every "(default …)" in the
// doc of an Options field gives the figures withDefaults sets.
func TestOptions_DocDefaultsMatchTheConstants(t *testing.T) {
	o := (&Options{}).withDefaults()
	want := map[string][]string{
		"AckTimeout":      {durMS(o.AckTimeout)},
		"RetryMin":        {durMS(o.RetryMin), durMS(o.RetryMax)},
		"PendingTTL":      {durMS(o.PendingTTL)},
		"MaxUnacked":      {count(o.MaxUnacked)},
		"TargetTimeout":   {durMS(o.TargetTimeout)},
		"MaxInflight":     {count(o.MaxInflight), count(o.MaxWaiters)},
		"DeltaIdleTTL":    {durMS(o.DeltaIdleTTL), durMS(o.DeltaMaxAge), durMS(o.DeltaSweep)},
		"MaxOpenDeltas":   {count(o.MaxOpenDeltas), size(o.MaxDeltaBytes)},
		"ActivityTimeout": {durMS(o.ActivityTimeout)},
		"OrderTTL":        {durMS(o.OrderTTL)},
	}
	f, err := parser.ParseFile(token.NewFileSet(), "options.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Options" {
			return true
		}
		for _, field := range ts.Type.(*ast.StructType).Fields.List {
			defaults := defaultNote.FindAllStringSubmatch(strings.Join(strings.Fields(field.Doc.Text()), " "), -1)
			if len(defaults) == 0 {
				continue
			}
			name := field.Names[0].Name
			seen[name] = true
			var got []string
			for _, d := range defaults {
				got = append(got, figure.FindAllString(d[1], -1)...)
			}
			w, ok := want[name]
			switch {
			case !ok:
				t.Errorf("Options.%s's doc states a default; check it here", name)
			case !slices.Equal(got, w):
				t.Errorf("Options.%s's doc says default %q; withDefaults gives %q", name, got, w)
			}
		}
		return false
	})
	for name := range want {
		if !seen[name] {
			t.Errorf("Options.%s's doc states no (default …)", name)
		}
	}
}

// defaultNote is a "(default …)" in a doc comment.
var defaultNote = regexp.MustCompile(`\(default ([^)]*)\)`)

// durMS writes d as the Options docs do: 1 h, 5 min, 60 s, 500 ms.
func durMS(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d/time.Millisecond)
	}
	return dur(d)
}
