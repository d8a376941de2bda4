package imv2test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Wildcards inside the expected JSON of expect and observe:
//
//	"*"        the member is present (any value but null)
//	"!absent"  the member is absent
//	"~REGEXP"  the value (a string, or a number or bool in its JSON form)
//	           matches REGEXP entirely, e.g. "~accepted|duplicate"
//
// Objects match when every expected member matches (other members are
// allowed); arrays match element by element and must have the same length.
const (
	wildAny    = "*"
	wildAbsent = "!absent"
)

// decodeJSON decodes s keeping numbers as json.Number.
func decodeJSON(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// mismatch returns "" when got satisfies want, else where and why not.
func mismatch(want, got any, at string) string {
	if s, ok := want.(string); ok {
		switch {
		case s == wildAny:
			if got == nil {
				return fmt.Sprintf("%s is missing", at)
			}
			return ""
		case strings.HasPrefix(s, "~"):
			re, err := regexp.Compile("^(?:" + s[1:] + ")$")
			if err != nil {
				return fmt.Sprintf("%s: bad pattern %q", at, s)
			}
			if got == nil || !re.MatchString(scalarText(got)) {
				return fmt.Sprintf("%s is %s, want %s", at, show(got), s[1:])
			}
			return ""
		}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s is %s, want an object", at, show(got))
		}
		for k, wv := range w {
			gv, present := g[k]
			if wv == wildAbsent {
				if present {
					return fmt.Sprintf("%s.%s is present (%s), want it absent", at, k, show(gv))
				}
				continue
			}
			if !present {
				return fmt.Sprintf("%s.%s is missing", at, k)
			}
			if m := mismatch(wv, gv, at+"."+k); m != "" {
				return m
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s is %s, want an array", at, show(got))
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s has %d elements, want %d", at, len(g), len(w))
		}
		for i := range w {
			if m := mismatch(w[i], g[i], fmt.Sprintf("%s[%d]", at, i)); m != "" {
				return m
			}
		}
		return ""
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return fmt.Sprintf("%s is %s, want %s", at, show(got), w)
		}
		wf, _ := strconv.ParseFloat(w.String(), 64)
		gf, _ := strconv.ParseFloat(g.String(), 64)
		if wf != gf {
			return fmt.Sprintf("%s is %s, want %s", at, g, w)
		}
		return ""
	}
	if fmt.Sprint(want) != fmt.Sprint(got) || (want == nil) != (got == nil) {
		return fmt.Sprintf("%s is %s, want %s", at, show(got), show(want))
	}
	return ""
}

func scalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// show renders a value for a one-line reason, shortened.
func show(v any) string {
	if v == nil {
		return "null"
	}
	b, _ := json.Marshal(v)
	return clip(string(b), 80)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
