package fastjson

import (
	"strings"
	"unicode/utf8"
)

// appendUnescape appends the decoded content of raw, content that str
// accepted, to dst; it is never longer than raw.
func appendUnescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, i+2)
			dst = utf8.AppendRune(dst, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst
}

// Short strings of one decode share a backing array (arena), so a
// packet costs one allocation for its IDs and names instead of one per
// field. A retained string keeps its whole array alive, so the array is
// small and private: never the frame or the payload (a kept message_id
// would pin up to a MiB), and never a slice handed to the caller (a
// string's bytes must not change).
const (
	// arenaMaxString is the longest string an arena takes; a longer one
	// is allocated on its own.
	arenaMaxString = 256
	// arenaMaxChunk bounds one backing array, and so what one retained
	// short string keeps alive.
	arenaMaxChunk = 1024
)

// arena makes strings over an append-only array that nothing else
// references: a strings.Builder, which never changes a byte once written
// (and does not zero an array it grows, which is all written over).
type arena struct {
	b strings.Builder
}

// reserve starts a new array of n bytes, the exact need of a caller that
// knows it (decodeEnvelopeFast, decodeChatMessageFast).
func (a *arena) reserve(n int) {
	if n > 0 {
		a.b = strings.Builder{}
		a.b.Grow(n)
	}
}

// str returns the content of raw (unescaped if esc) as a string. rest is
// the length of the input from raw on: no decode of that input asks for
// more string bytes, so a new array is min(rest, arenaMaxChunk) long.
func (a *arena) str(raw []byte, esc bool, rest int) string {
	switch {
	case len(raw) == 0:
		return ""
	case len(raw) > arenaMaxString:
		if esc {
			return string(appendUnescape(make([]byte, 0, len(raw)), raw))
		}
		return string(raw)
	case a.b.Cap()-a.b.Len() < len(raw): // unescaping only shortens
		a.b = strings.Builder{} // the strings made keep the old array
		a.b.Grow(min(max(rest, len(raw)), arenaMaxChunk))
	}
	start := a.b.Len()
	if esc {
		var tmp [arenaMaxString]byte
		a.b.Write(appendUnescape(tmp[:0], raw))
	} else {
		a.b.Write(raw)
	}
	return a.b.String()[start:]
}

// Text reads a string value and returns the matching constant of known
// without an allocation when there is one, else the string in the
// scanner's arena.
func (s *Scanner) Text(known ...string) (string, bool) {
	s.ws()
	rest := len(s.b) - s.i
	raw, esc, ok := s.Str()
	if !ok {
		return "", false
	}
	if !esc {
		for _, k := range known {
			if string(raw) == k {
				return k, true
			}
		}
	}
	return s.strs.str(raw, esc, rest), true
}

// maxDeferred bounds the strings of one frame made at its end; the rest
// are made as they are read, in arrays of their own.
const maxDeferred = 24

// Deferred holds the raw strings of one frame or payload until its end,
// so that one array of their exact size holds them all (MakeDeferred). A
// string is named by its place (file, field: the caller's terms) or, for
// a field that stays where it is, by a pointer (DeferFixed): a slice the
// caller fills may still grow, and the values may still be on its stack.
type Deferred struct {
	n, size int
	e       [maxDeferred]deferredStr
}

type deferredStr struct {
	file, field int
	to          *string // the field, for DeferFixed
	raw         []byte
	esc         bool
}

// Mark is what Deferred held at a point, to go back to (Restore).
type Mark struct{ n, size int }

// Mark returns what d holds now.
func (d *Deferred) Mark() Mark { return Mark{d.n, d.size} }

// Restore drops what was deferred to d since m.
func (d *Deferred) Restore(m Mark) { d.n, d.size = m.n, m.size }

// DeferText reads a string value for the field (file, field), whose
// storage now is dst: an empty one is left "", a short one is deferred to
// d while d stays within maxDeferred strings and arenaMaxChunk bytes, and
// any other is made now.
func (s *Scanner) DeferText(d *Deferred, dst *string, file, field int) bool {
	s.ws()
	rest := len(s.b) - s.i
	raw, esc, ok := s.Str()
	switch {
	case !ok:
		return false
	case len(raw) == 0:
		*dst = ""
	case len(raw) <= arenaMaxString && d.n < maxDeferred && d.size+len(raw) <= arenaMaxChunk:
		d.e[d.n] = deferredStr{file: file, field: field, raw: raw, esc: esc}
		d.n++
		d.size += len(raw) // unescaping only shortens
	default:
		*dst = s.strs.str(raw, esc, rest)
	}
	return true
}

// DeferFixed is DeferText for a field that stays where it is until the
// strings are made (in a heap value, not on the stack).
func (s *Scanner) DeferFixed(d *Deferred, dst *string) bool {
	n := d.n
	if !s.DeferText(d, dst, 0, 0) {
		return false
	}
	if d.n > n {
		d.e[n].to = dst
	}
	return true
}

// MakeDeferred makes the strings deferred to d in one array of their
// exact size and stores each in its field: dst(file, field) for those
// DeferText deferred (dst may be nil when there are none).
func (s *Scanner) MakeDeferred(d *Deferred, dst func(file, field int) *string) {
	s.strs.reserve(d.size)
	for i := range d.e[:d.n] {
		e := &d.e[i]
		to := e.to
		if to == nil {
			to = dst(e.file, e.field)
		}
		*to = s.strs.str(e.raw, e.esc, 0)
	}
}
