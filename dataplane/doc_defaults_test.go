package dataplane

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	// docDefault is a constant named in doc.go with the figures it is
	// given in parentheses: "DefaultReadLimit (1 MiB)",
	// "DefaultReconnectMin..DefaultReconnectMax (500 ms..30 s, jittered)".
	// A name qualified by another package (state.X) is that package's.
	docDefault = regexp.MustCompile(`(?:^|[^.\w])(Default\w+)(?:\.\.(Default\w+))? \(([^)]*)\)`)
	docFigure  = regexp.MustCompile(`\d+(?:[.,]\d+)*(?: (?:MiB|KiB|bytes|min|ms|h|s)\b)?`)
)

// TestDoc_DefaultsMatchTheConstants: every figure the package doc gives a
// Default constant is the constant's value.
func TestDoc_DefaultsMatchTheConstants(t *testing.T) {
	want := map[string][]string{
		"DefaultReadLimit":          {docSize(DefaultReadLimit)},
		"DefaultWriteTimeout":       {docDur(DefaultWriteTimeout)},
		"DefaultPingInterval":       {docDur(DefaultPingInterval)},
		"DefaultPongTimeout":        {docDur(DefaultPongTimeout)},
		"DefaultHelloTimeout":       {docDur(DefaultHelloTimeout)},
		"DefaultMaxPreHello":        {docCount(DefaultMaxPreHello)},
		"DefaultMaxConnectorMemory": {docSize(DefaultMaxConnectorMemory)},
		"DefaultMaxMemory":          {docSize(DefaultMaxMemory)},
		"DefaultMaxConnectors":      {docCount(DefaultMaxConnectors)},
		"DefaultOfflineGrace":       {docDur(DefaultOfflineGrace)},
		"DefaultMaxChannels":        {docCount(DefaultMaxChannels)},
		"DefaultMaxHandlerCalls":    {docCount(DefaultMaxHandlerCalls)},
		"DefaultReconnectMin":       {docDur(DefaultReconnectMin), docDur(DefaultReconnectMax)},
		"DefaultRequestTimeout":     {docDur(DefaultRequestTimeout)},
	}
	// Defined in store.go, which is moving to the store package: not
	// named here so this test does not pin where it lives.
	unchecked := map[string]bool{"DefaultStoreCap": true}

	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, line := range strings.Split(string(b), "\n") {
		text = append(text, strings.TrimSpace(strings.TrimPrefix(line, "//")))
	}
	matches := docDefault.FindAllStringSubmatch(strings.Join(text, " "), -1)
	if len(matches) == 0 {
		t.Fatal("doc.go names no Default constant with its figure")
	}
	for _, m := range matches {
		name := m[1]
		if unchecked[name] {
			continue
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("doc.go gives %s a figure (%s); check it here", name, m[3])
			continue
		}
		if got := docFigure.FindAllString(m[3], -1); !slices.Equal(got, w) {
			t.Errorf("doc.go says %s is %q; the constant is %q", name, got, w)
		}
	}
}

func docCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func docDur(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d ms", d/time.Millisecond)
}

func docSize(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
