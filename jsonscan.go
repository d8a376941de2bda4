package imv2

import (
	"encoding/binary"
	"math"
	"strings"
	"unicode/utf8"
)

// scanner is the hot path's strict JSON reader. The codec
// (go-json-experiment/json) stays the reference: every fast reader of this
// package either returns exactly what the codec would, or gives up (ok =
// false) and the caller runs the codec, which then decides and words any
// error. So the scanner may refuse anything unusual — a duplicate or
// escaped member name, a surrogate escape, null, a forbidden member name,
// a number that is not a plain integer — without a semantic choice of its
// own. An unknown member is checked and skipped (E5), as the codec
// ignores it. The differential tests in jsonscan_test.go hold it to that.
type scanner struct {
	b []byte
	i int
	// forbid makes members refuse the member names these rules forbid at
	// an IM v2 payload's top level and in a files[] item, and deep makes
	// object refuse those they forbid inside a member the SDK does not
	// know (forbidden.go); 0 refuses none. The codec path words the error.
	forbid, deep nameRules
	// strs holds the short strings a decode makes, one backing array for many.
	strs strArena
}

// maxScanDepth and maxScanMembers bound what the generic validator takes on;
// deeper or wider values go to the codec.
const (
	maxScanDepth   = 32
	maxScanMembers = 32
)

func (s *scanner) ws() {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return // compact JSON: no whitespace, one test
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// eat consumes c after optional whitespace.
func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// str reads a string at the cursor and returns its raw content (between
// the quotes). esc reports backslash escapes. The content is checked:
// valid UTF-8, no control characters, well-formed escapes; a \u escape of
// a surrogate half is left to the codec.
func (s *scanner) str() (raw []byte, esc, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	i := start
	b := s.b
	for i < len(b) {
		// Eight plain bytes at a time, then one at a time up to the next
		// byte that is not plain.
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return b[start:i], esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return nil, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok || utf16Surrogate(r) {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return nil, false, false
			}
			i += n
		}
	}
	return nil, false, false
}

// plain8 reports whether the eight bytes of x are all plain (plainByte):
// none below 0x20, none at or above 0x80, no quote and no backslash. Each
// test is the exact "has a byte below n" bit trick: a borrow only
// propagates from a byte that matches.
func plain8(x uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((x-ones*0x20)&^x|(q-ones)&^q|(b-ones)&^b|x)&highs == 0
}

// plainString reports whether every byte of s is plain (plainByte): JSON
// holds s between quotes as it is.
func plainString(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if !plain8(uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56) {
			return false
		}
	}
	for ; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte marks the bytes a string holds as they are: printable ASCII
// but the quote and the backslash. It is a constant table.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func utf16Surrogate(r rune) bool { return r >= 0xD800 && r < 0xE000 }

// hex4 parses the four hex digits of a \u escape at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

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

// Short strings of one decode share a backing array (strArena), so a
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

// strArena makes strings over an append-only array that nothing else
// references: a strings.Builder, which never changes a byte once written
// (and does not zero an array it grows, which is all written over).
type strArena struct {
	b strings.Builder
}

// reserve starts a new array of n bytes, the exact need of a caller that
// knows it (decodeEnvelopeFast, decodeChatMessageFast).
func (a *strArena) reserve(n int) {
	if n > 0 {
		a.b = strings.Builder{}
		a.b.Grow(n)
	}
}

// str returns the content of raw (unescaped if esc) as a string. rest is
// the length of the input from raw on: no decode of that input asks for
// more string bytes, so a new array is min(rest, arenaMaxChunk) long.
func (a *strArena) str(raw []byte, esc bool, rest int) string {
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

// name reads a member name and the colon after it. Escaped names are left
// to the codec: they may spell a known name another way.
func (s *scanner) name() ([]byte, bool) {
	s.ws()
	raw, esc, ok := s.str()
	if !ok || esc || !s.eat(':') {
		return nil, false
	}
	s.ws()
	return raw, true
}

// next consumes the separator after a member or element: it reports
// more = true after a comma and false after the closing byte.
func (s *scanner) next(closing byte) (more, ok bool) {
	s.ws()
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ',':
			s.i++
			return true, true
		case closing:
			s.i++
			return false, true
		}
	}
	return false, false
}

// int reads a plain integer (no fraction, exponent, leading zero or
// "-0") that fits an int64.
func (s *scanner) int() (int64, bool) {
	s.ws()
	b, i := s.b, s.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var v uint64
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		v = v*10 + uint64(b[i]-'0')
		i++
	}
	n := i - start
	switch {
	case n == 0 || n > 19: // 19 digits cannot wrap a uint64
		return 0, false
	case b[start] == '0' && (n > 1 || neg): // "01", "-0"
		return 0, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return 0, false
	case !neg && v > math.MaxInt64, neg && v > -math.MinInt64:
		return 0, false
	}
	s.i = i
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// integral reads a number whose value is an integer that fits an int64,
// in any notation the public schema's "integer" takes: 1790000000000,
// 1.79e12, 1790000000000.0 (integralNumber).
func (s *scanner) integral() (int64, bool) {
	s.ws()
	start := s.i
	if !s.number() {
		return 0, false
	}
	v, ok := integralNumber(s.b[start:s.i])
	if !ok {
		s.i = start
	}
	return v, ok
}

// integralNumber returns the value of b, a number of valid JSON syntax,
// when it is an integer that fits an int64: an exponent and a fraction of
// zeros are fine, "-0" is 0; a non-zero fraction or a value out of range
// is not. It is exact (no float rounding) and does not allocate.
func integralNumber(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	// Split digits [intPart][frac] and the exponent.
	mant, exp := b, 0
	for i, c := range b {
		if c == 'e' || c == 'E' {
			mant = b[:i]
			e := b[i+1:]
			eneg := len(e) > 0 && e[0] == '-'
			if len(e) > 0 && (e[0] == '-' || e[0] == '+') {
				e = e[1:]
			}
			for _, d := range e {
				if exp < 1_000_000 { // beyond, the verdict no longer changes
					exp = exp*10 + int(d-'0')
				}
			}
			if eneg {
				exp = -exp
			}
			break
		}
	}
	intPart, frac := mant, mant[:0]
	for i, c := range mant {
		if c == '.' {
			intPart, frac = mant[:i], mant[i+1:]
			break
		}
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	if len(intPart) == 0 { // leading zeros of the fraction are leading zeros
		for len(frac) > 0 && frac[0] == '0' {
			frac = frac[1:]
			exp--
		}
	}
	// The value is digits(intPart+frac) × 10^(exp-len(frac)).
	nd := len(intPart) + len(frac)
	if nd == 0 {
		return 0, true
	}
	scale := exp - len(frac)
	// Trailing zeros of the digits may pay for a negative scale.
	tz := 0
	if len(frac) == 0 {
		for tz < len(intPart) && intPart[len(intPart)-1-tz] == '0' {
			tz++
		}
	}
	if scale < 0 {
		if -scale > tz {
			return 0, false // a non-zero fraction
		}
		nd += scale
		scale = 0
	}
	if nd+scale > 19 {
		return 0, false
	}
	var v uint64
	for i := 0; i < nd; i++ {
		var c byte
		if i < len(intPart) {
			c = intPart[i]
		} else {
			c = frac[i-len(intPart)]
		}
		v = v*10 + uint64(c-'0')
	}
	for range scale {
		v *= 10
	}
	switch {
	case !neg && v > math.MaxInt64, neg && v > -math.MinInt64:
		return 0, false
	case neg:
		return -int64(v), true
	}
	return int64(v), true
}

// value checks one JSON value of any kind at the cursor: RFC 8259 syntax,
// valid UTF-8, and no duplicate member name in any object (RFC 7493, as
// the codec checks by default).
func (s *scanner) value(depth int) bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; c {
	case '{':
		return s.object(depth + 1)
	case '[':
		if depth+1 > maxScanDepth {
			return false
		}
		s.i++
		s.ws()
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			more, ok := s.next(']')
			if !ok {
				return false
			}
			if !more {
				return true
			}
		}
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *scanner) object(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++ // '{'
	s.ws()
	if s.peek() == '}' {
		s.i++
		return true
	}
	var names [maxScanMembers][]byte
	n := 0
	for {
		name, ok := s.name()
		if !ok || n == maxScanMembers {
			return false
		}
		if forbiddenName(name, s.deep) {
			return false
		}
		for _, prev := range names[:n] {
			if string(prev) == string(name) {
				return false
			}
		}
		names[n] = name
		n++
		if !s.value(depth) {
			return false
		}
		more, ok := s.next('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number checks the RFC 8259 number grammar.
func (s *scanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	s.i = i
	return true
}

// validObject reports whether b is exactly one JSON object (no surrounding
// whitespace) that the codec would take as valid. false means "not sure":
// ask the codec.
func validObject(b []byte) bool {
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	s := scanner{b: b}
	return s.value(0) && s.i == len(b)
}
