package imv2

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xagentkit/imv2/internal/readmetable"
)

// TestREADME_DefaultLimitsMatchTheConstants: the README's "Default limits"
// table is the one place the defaults are listed for a reader; every
// figure in its limit and default columns must be what the constants and
// Options.withDefaults give, and every row must be checked here.
func TestREADME_DefaultLimitsMatchTheConstants(t *testing.T) {
	o := (&Options{}).withDefaults()
	want := map[string][]string{
		"pending messages per channel":                                         {readmetable.Count(DefaultPendingCap)},
		"pending age, connected or not (a negative `PendingTTL` turns it off)": {readmetable.Dur(o.PendingTTL)},
		"ack timeout / backoff":                                                {readmetable.Dur(o.AckTimeout), readmetable.Dur(o.RetryMin), readmetable.Dur(o.RetryMax)},
		"sent messages awaiting an ack per channel":                            {readmetable.Count(o.MaxUnacked)},
		"Target call": {readmetable.Dur(o.TargetTimeout)},
		"messages queued for the Target per channel (posted one at a time, in order)":     {readmetable.Count(o.MaxInflight)},
		"resends waiting on one in-flight message":                                        {readmetable.Count(o.MaxWaiters)},
		"hold of a message rejected retryable over the channel's later ones (`OrderTTL`)": {readmetable.Dur(o.OrderTTL), readmetable.Count(o.MaxInflight)},
		"open delta streams per channel":                                                  {readmetable.Count(o.MaxOpenDeltas)},
		"assembled delta text (+8 bytes per delta)":                                       {readmetable.Size(int64(deltaOverhead)), readmetable.Size(int64(o.MaxDeltaBytes))},
		"delta stream idle / age (`DeltaIdleTTL`, `DeltaMaxAge`)":                         {readmetable.Dur(o.DeltaIdleTTL), readmetable.Dur(o.DeltaMaxAge), readmetable.Dur(o.DeltaSweep)},
		"completed records": {readmetable.Count(DefaultCompletedCap), readmetable.Dur(DefaultCompletedTTL)},
		"records (and claims) copied by one handover to a new channel ID": {readmetable.Count(MaxHandoverRecords)},
		"claim of a message while its Target runs":                        {readmetable.Count(int(o.ClaimLease / o.TargetTimeout))},
		"activity shown without refresh":                                  {readmetable.Dur(o.ActivityTimeout)},
		"`message_id`, `file_ref`":                                        {readmetable.Size(int64(MaxIDBytes))},
		"message text":                                                    {readmetable.Size(int64(MaxTextBytes))},
		"files per message / filename":                                    {readmetable.Count(MaxFilesPerMessage), readmetable.Count(MaxFilenameChars)},
	}
	rows, err := readmetable.Rows("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for label, cells := range rows {
		if readmetable.Elsewhere[label] != "" {
			continue // its package checks it
		}
		w, ok := want[label]
		if !ok {
			t.Errorf("README row %q: no constant checks it; add it here", label)
			continue
		}
		if got := readmetable.Figure.FindAllString(cells, -1); !slices.Equal(got, w) {
			t.Errorf("README row %q says %q; the constants give %q", label, got, w)
		}
	}
	for label := range want {
		if _, ok := rows[label]; !ok {
			t.Errorf("README has no row %q", label)
		}
	}
}

// TestOptions_DocDefaultsMatchTheConstants: every "(default …)" in the
// doc of an Options field gives the figures withDefaults sets.
func TestOptions_DocDefaultsMatchTheConstants(t *testing.T) {
	o := (&Options{}).withDefaults()
	want := map[string][]string{
		"AckTimeout":      {durMS(o.AckTimeout)},
		"RetryMin":        {durMS(o.RetryMin), durMS(o.RetryMax)},
		"PendingTTL":      {durMS(o.PendingTTL)},
		"MaxUnacked":      {readmetable.Count(o.MaxUnacked)},
		"TargetTimeout":   {durMS(o.TargetTimeout)},
		"MaxInflight":     {readmetable.Count(o.MaxInflight), readmetable.Count(o.MaxWaiters)},
		"DeltaIdleTTL":    {durMS(o.DeltaIdleTTL), durMS(o.DeltaMaxAge), durMS(o.DeltaSweep)},
		"MaxOpenDeltas":   {readmetable.Count(o.MaxOpenDeltas), readmetable.Size(int64(o.MaxDeltaBytes))},
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
				got = append(got, readmetable.Figure.FindAllString(d[1], -1)...)
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
	return readmetable.Dur(d)
}
