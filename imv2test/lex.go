package imv2test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// token is one word of a command line: positional (key "") or key=value.
// isJSON marks a JSON object or array, kept verbatim.
type token struct {
	key    string
	val    string
	isJSON bool
}

// lex splits a command line into tokens. A JSON object or array is one
// token (strings inside may hold spaces and braces); "…" is a Go-quoted
// string; key=value takes a bare, quoted or JSON value.
func lex(line string) ([]token, error) {
	var out []token
	i := 0
	for i < len(line) {
		switch c := line[i]; {
		case c == ' ' || c == '\t':
			i++
			continue
		case c == '{' || c == '[':
			end, err := jsonEnd(line, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{val: line[i:end], isJSON: true})
			i = end
			continue
		case c == '"':
			s, end, err := quoted(line, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{val: s})
			i = end
			continue
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '=' {
			j++
		}
		if j < len(line) && line[j] == '=' && j > i {
			key := line[i:j]
			j++
			switch {
			case j < len(line) && line[j] == '"':
				s, end, err := quoted(line, j)
				if err != nil {
					return nil, err
				}
				out = append(out, token{key: key, val: s})
				i = end
			case j < len(line) && (line[j] == '{' || line[j] == '['):
				end, err := jsonEnd(line, j)
				if err != nil {
					return nil, err
				}
				out = append(out, token{key: key, val: line[j:end], isJSON: true})
				i = end
			default:
				k := j
				for k < len(line) && line[k] != ' ' && line[k] != '\t' {
					k++
				}
				out = append(out, token{key: key, val: line[j:k]})
				i = k
			}
			continue
		}
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		out = append(out, token{val: line[i:j]})
		i = j
	}
	return out, nil
}

// jsonEnd returns the index after the JSON value starting at line[i].
func jsonEnd(line string, i int) (int, error) {
	depth, inStr, esc := 0, false, false
	for j := i; j < len(line); j++ {
		c := line[j]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced JSON at column %d", i+1)
}

func quoted(line string, i int) (string, int, error) {
	for j := i + 1; j < len(line); j++ {
		if line[j] == '\\' {
			j++
			continue
		}
		if line[j] == '"' {
			s, err := strconv.Unquote(line[i : j+1])
			return s, j + 1, err
		}
	}
	return "", 0, fmt.Errorf("unterminated string at column %d", i+1)
}

// vars holds a run's variables: plain values ($NAME) and saved JSON
// documents (${NAME.path}: packets bound with as=, HTTP bodies).
type vars struct {
	plain map[string]string
	docs  map[string]any
}

func newVars() *vars { return &vars{plain: map[string]string{}, docs: map[string]any{}} }

func (v *vars) set(name, val string) { v.plain[name] = val }

// bindDoc saves a JSON document under name.
func (v *vars) bindDoc(name string, raw []byte) error {
	var doc any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return err
	}
	v.docs[name] = doc
	return nil
}

// freshID returns a new unique ID for an unbound variable: its name in
// lower case and 12 random hex digits, e.g. $M1 → m1_3f9a…
func freshID(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(name) + "_" + hex.EncodeToString(b[:])
}

// expand replaces $NAME, ${NAME}, ${NAME.path.0.key} and ${text:N} in s.
// An unbound plain variable is bound to a fresh unique ID on first use, so
// scripts write $M1 for "a new message_id". When inJSON is true, values
// substituted inside JSON strings are escaped.
func (v *vars) expand(s string, inJSON bool) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inJSON {
			switch {
			case esc:
				esc = false
			case inStr && c == '\\':
				esc = true
			case c == '"':
				inStr = !inStr
			}
		}
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		var ref string
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			ref = s[i+2 : i+end]
			i += end
		} else {
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte(c)
				continue
			}
			ref = s[i+1 : j]
			i = j - 1
		}
		val, err := v.lookup(ref)
		if err != nil {
			return "", err
		}
		if inJSON && inStr {
			q, _ := json.Marshal(val)
			val = string(q[1 : len(q)-1])
		}
		b.WriteString(val)
	}
	return b.String(), nil
}

func isIdent(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func (v *vars) lookup(ref string) (string, error) {
	if n, ok := strings.CutPrefix(ref, "text:"); ok {
		size, err := strconv.Atoi(n)
		if err != nil || size < 0 || size > 8<<20 {
			return "", fmt.Errorf("${text:N}: bad size %q", n)
		}
		return strings.Repeat("x", size), nil
	}
	name, path, dotted := strings.Cut(ref, ".")
	if !dotted {
		if val, ok := v.plain[name]; ok {
			return val, nil
		}
		if _, ok := v.docs[name]; ok {
			return "", fmt.Errorf("$%s is a saved document: use ${%s.field}", name, name)
		}
		val := freshID(name)
		v.plain[name] = val
		return val, nil
	}
	doc, ok := v.docs[name]
	if !ok {
		return "", fmt.Errorf("${%s}: nothing saved as %s", ref, name)
	}
	got, ok := walk(doc, path)
	if !ok {
		return "", fmt.Errorf("${%s}: no such member", ref)
	}
	switch g := got.(type) {
	case string:
		return g, nil
	case json.Number:
		return g.String(), nil
	case bool:
		return strconv.FormatBool(g), nil
	}
	raw, _ := json.Marshal(got)
	return string(raw), nil
}

// walk follows a dotted path (object keys, array indexes) into doc.
func walk(doc any, path string) (any, bool) {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
