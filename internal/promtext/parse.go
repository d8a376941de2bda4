package promtext

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parse reads an exposition in the text format strictly, as the tests
// of every command serving /metrics do: metric and label names, label
// value escapes, one HELP and one TYPE per family, each before the
// family's samples, a family's samples together, no series twice,
// counters not negative, and histograms whose buckets rise to a +Inf
// bucket equal to the count. It returns every sample by series,
// NAME{label="value",…} as written (no braces without labels).
func Parse(data []byte) (map[string]float64, error) {
	p := parser{series: map[string]float64{}, types: map[string]string{}, help: map[string]bool{}, done: map[string]bool{}, hist: map[string]*histCheck{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if err := p.line(sc.Text()); err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", n, err, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("the last line has no newline")
	}
	for key, h := range p.hist {
		if !h.inf {
			return nil, fmt.Errorf("histogram %s has no +Inf bucket", key)
		}
		if c, ok := h.count, h.hasCount; !ok || c != h.last {
			return nil, fmt.Errorf("histogram %s: count %v, +Inf bucket %v", key, c, h.last)
		}
	}
	return p.series, nil
}

type parser struct {
	series  map[string]float64
	types   map[string]string
	help    map[string]bool
	done    map[string]bool // families whose samples ended
	current string          // the family of the samples being read
	hist    map[string]*histCheck
}

// histCheck follows one histogram series (its labels less le).
type histCheck struct {
	lastLE   float64
	last     float64
	inf      bool
	buckets  int
	count    float64
	hasCount bool
}

func (p *parser) line(l string) error {
	if l == "" {
		return nil
	}
	if rest, ok := strings.CutPrefix(l, "#"); ok {
		fs := strings.SplitN(strings.TrimLeft(rest, " "), " ", 3)
		if len(fs) < 2 || (fs[0] != "HELP" && fs[0] != "TYPE") {
			return nil // a comment
		}
		name := fs[1]
		if !validName(name, true) {
			return fmt.Errorf("bad metric name %q", name)
		}
		if p.done[name] || p.current == name {
			return fmt.Errorf("%s of %s after its samples", fs[0], name)
		}
		if fs[0] == "HELP" {
			if p.help[name] {
				return fmt.Errorf("second HELP for %s", name)
			}
			p.help[name] = true
			return nil
		}
		if _, ok := p.types[name]; ok {
			return fmt.Errorf("second TYPE for %s", name)
		}
		if len(fs) < 3 {
			return fmt.Errorf("TYPE without a type")
		}
		switch fs[2] {
		case "counter", "gauge", "histogram", "summary", "untyped":
		default:
			return fmt.Errorf("unknown type %q", fs[2])
		}
		p.types[name] = fs[2]
		return nil
	}
	name, labels, value, err := sample(l)
	if err != nil {
		return err
	}
	fam, suffix := p.family(name)
	if fam != p.current {
		if p.done[fam] {
			return fmt.Errorf("family %s resumed after another", fam)
		}
		if p.current != "" {
			p.done[p.current] = true
		}
		p.current = fam
	}
	key := name
	if len(labels) > 0 {
		parts := make([]string, 0, len(labels)/2)
		for i := 0; i < len(labels); i += 2 {
			parts = append(parts, labels[i]+"="+strconv.Quote(labels[i+1]))
		}
		key += "{" + strings.Join(parts, ",") + "}"
	}
	if _, dup := p.series[key]; dup {
		return fmt.Errorf("series %s twice", key)
	}
	p.series[key] = value
	typ := p.types[fam]
	if typ == "counter" && (value < 0 || math.IsNaN(value)) {
		return fmt.Errorf("counter %s is %v", key, value)
	}
	if typ == "histogram" {
		return p.histogram(fam, suffix, labels, value)
	}
	if typ == "summary" && suffix == "" && !hasLabel(labels, "quantile") {
		return fmt.Errorf("summary sample without a quantile")
	}
	return nil
}

// family is the family a sample name belongs to, and its suffix.
func (p *parser) family(name string) (string, string) {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok {
			if t := p.types[base]; t == "histogram" || (t == "summary" && s != "_bucket") {
				return base, s
			}
		}
	}
	return name, ""
}

func (p *parser) histogram(fam, suffix string, labels []string, v float64) error {
	var le string
	rest := make([]string, 0, len(labels))
	for i := 0; i < len(labels); i += 2 {
		if labels[i] == "le" {
			le = labels[i+1]
			continue
		}
		rest = append(rest, labels[i], labels[i+1])
	}
	key := fam + fmt.Sprint(rest)
	h := p.hist[key]
	if h == nil {
		h = &histCheck{lastLE: math.Inf(-1)}
		p.hist[key] = h
	}
	switch suffix {
	case "_bucket":
		if h.inf || h.hasCount {
			return fmt.Errorf("bucket after the +Inf bucket or the count")
		}
		b, err := strconv.ParseFloat(le, 64)
		if le == "" || err != nil || b <= h.lastLE {
			return fmt.Errorf("bucket le %q not above the last", le)
		}
		if v < h.last {
			return fmt.Errorf("bucket count %v below the last %v", v, h.last)
		}
		h.lastLE, h.last, h.inf = b, v, math.IsInf(b, 1)
		h.buckets++
	case "_count":
		h.count, h.hasCount = v, true
	case "_sum":
	default:
		return fmt.Errorf("histogram sample without a suffix")
	}
	return nil
}

func hasLabel(labels []string, name string) bool {
	for i := 0; i < len(labels); i += 2 {
		if labels[i] == name {
			return true
		}
	}
	return false
}

// sample splits a sample line into its name, labels (name-value pairs,
// unescaped) and value; a timestamp after the value must be an integer.
func sample(l string) (string, []string, float64, error) {
	i := strings.IndexAny(l, "{ ")
	if i <= 0 {
		return "", nil, 0, fmt.Errorf("no value")
	}
	name := l[:i]
	if !validName(name, true) {
		return "", nil, 0, fmt.Errorf("bad metric name %q", name)
	}
	var labels []string
	rest := l[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		seen := map[string]bool{}
		for {
			if r, ok := strings.CutPrefix(rest, "}"); ok {
				rest = r
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || !validName(rest[:eq], false) || eq+1 >= len(rest) || rest[eq+1] != '"' {
				return "", nil, 0, fmt.Errorf("bad label")
			}
			ln := rest[:eq]
			if seen[ln] {
				return "", nil, 0, fmt.Errorf("label %s twice", ln)
			}
			seen[ln] = true
			val, n, err := labelValue(rest[eq+2:])
			if err != nil {
				return "", nil, 0, err
			}
			labels = append(labels, ln, val)
			rest = rest[eq+2+n:]
			if r, ok := strings.CutPrefix(rest, ","); ok {
				rest = r
			} else if !strings.HasPrefix(rest, "}") {
				return "", nil, 0, fmt.Errorf("labels not separated by a comma")
			}
		}
	}
	rest, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return "", nil, 0, fmt.Errorf("no space before the value")
	}
	fs := strings.Split(rest, " ")
	if len(fs) > 2 || fs[0] == "" {
		return "", nil, 0, fmt.Errorf("bad value")
	}
	v, err := strconv.ParseFloat(fs[0], 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("bad value %q", fs[0])
	}
	if len(fs) == 2 {
		if _, err := strconv.ParseInt(fs[1], 10, 64); err != nil {
			return "", nil, 0, fmt.Errorf("bad timestamp %q", fs[1])
		}
	}
	return name, labels, v, nil
}

// labelValue reads a quoted value's body up to and including its closing
// quote; it returns the value and the bytes read.
func labelValue(s string) (string, int, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\n':
			return "", 0, fmt.Errorf("newline in a label value")
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("unfinished escape")
			}
			i++
			switch s[i] {
			case '\\':
				b.WriteByte('\\')
			case '"':
				b.WriteByte('"')
			case 'n':
				b.WriteByte('\n')
			default:
				return "", 0, fmt.Errorf("bad escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated label value")
}

// validName checks a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, without
// colons, a label name.
func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (colon && c == ':') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}
