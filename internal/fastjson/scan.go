// Package fastjson is the machinery of the SDK's hand-written JSON codec:
// a strict scanner (Scanner), a string arena that makes a frame's short
// strings in one allocation (Deferred), exact integral numbers
// (IntegralNumber) and a string writer (AppendQuote). The decoders and
// encoders of the profile's types, built on it, are in the root package
// (fastdecode.go, fastencode.go); the codec, go-json-experiment/json,
// stays the reference for every input they give up on.
//
// It is kept because it pays end to end (issue 24). With the codec in
// place of the fast decoders, a message acknowledged over a loopback
// WebSocket costs 1.8× the wall time and 1.9× the CPU, with 50
// allocations instead of 16 (RoundTripWS/sdk-64), and 1.35× the time and
// 1.5× the CPU with 57 instead of 21 on 1,000 channels
// (ChannelsWS/ch-1000). With jsonv2.Marshal and jsontext.AppendQuote in
// place of the fast encoders, it costs 1.23× the time and the CPU, with 19
// allocations instead of 16 (RoundTripWS/sdk-64), and 1.2× the CPU on one
// channel (ChannelsWS/ch-1).
// The one-in-flight round trip (sdk-1), bound by latency, moves less.
// Medians of 7 and 14 interleaved pairs on a shared 2-core machine (load
// 3 to 12) of
//
//	go test -c -o /tmp/dp.test ./dataplane
//	/tmp/dp.test -test.run '^$' -test.bench '^Benchmark(RoundTripWS|ChannelsWS)$' -test.benchtime 2s
//
// against builds whose fast decoders return ok = false, or whose encoders
// call the codec. A fast check of an encoded payload (jsontext's IsValid
// instead) paid under 5 % and was dropped.
package fastjson

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// Names is a set of member names an object may not hold (the profile's
// forbidden names, in the caller's terms).
type Names interface {
	Has(name []byte) bool
}

// Scanner is the hot path's strict JSON reader. The codec
// (go-json-experiment/json) stays the reference: a reader built on it
// either returns exactly what the codec would, or gives up (ok = false)
// and its caller runs the codec, which then decides and words any error.
// So the scanner may refuse anything unusual — a duplicate or escaped
// member name, a surrogate escape, null, a forbidden member name, a number
// that is not a plain integer — without a semantic choice of its own. An
// unknown member is checked and skipped (Members), as the codec ignores
// it.
type Scanner struct {
	b []byte
	i int
	// forbid makes Members refuse the names it holds as the object's own
	// members, and deep makes any object Value checks refuse those it
	// holds; nil refuses none. The codec path words the error.
	forbid, deep Names
	// strs holds the short strings a decode makes, one backing array for many.
	strs arena
}

// New returns a Scanner of b, at its start.
func New(b []byte) Scanner { return Scanner{b: b} }

// SetRules sets the names Members refuses among an object's own members
// (forbid) and those any object inside a checked value refuses (deep).
func (s *Scanner) SetRules(forbid, deep Names) { s.forbid, s.deep = forbid, deep }

// Pos returns the cursor: the offset of the next byte to read.
func (s *Scanner) Pos() int { return s.i }

// Seek moves the cursor back to pos, a value Pos returned.
func (s *Scanner) Seek(pos int) { s.i = pos }

// maxScanDepth and maxScanMembers bound what the generic validator takes on;
// deeper or wider values go to the codec.
const (
	maxScanDepth   = 32
	maxScanMembers = 32
)

func (s *Scanner) ws() {
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

// Peek returns the next byte, or 0 at the end.
func (s *Scanner) Peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// Eat consumes c after optional whitespace.
func (s *Scanner) Eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (s *Scanner) End() bool {
	s.ws()
	return s.i == len(s.b)
}

// Str reads a string at the cursor and returns its raw content (between
// the quotes). esc reports backslash escapes. The content is checked:
// valid UTF-8, no control characters, well-formed escapes; a \u escape of
// a surrogate half is left to the codec.
func (s *Scanner) Str() (raw []byte, esc, ok bool) {
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

// Name reads a member name and the colon after it. Escaped names are left
// to the codec: they may spell a known name another way.
func (s *Scanner) Name() ([]byte, bool) {
	s.ws()
	raw, esc, ok := s.Str()
	if !ok || esc || !s.Eat(':') {
		return nil, false
	}
	s.ws()
	return raw, true
}

// Next consumes the separator after a member or element: it reports
// more = true after a comma and false after the closing byte.
func (s *Scanner) Next(closing byte) (more, ok bool) {
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

// Int reads a plain integer (no fraction, exponent, leading zero or
// "-0") that fits an int64.
func (s *Scanner) Int() (int64, bool) {
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

// Integral reads a number whose value is an integer that fits an int64,
// in any notation the public schema's "integer" takes: 1790000000000,
// 1.79e12, 1790000000000.0 (IntegralNumber).
func (s *Scanner) Integral() (int64, bool) {
	s.ws()
	start := s.i
	if !s.number() {
		return 0, false
	}
	v, ok := IntegralNumber(s.b[start:s.i])
	if !ok {
		s.i = start
	}
	return v, ok
}

// Value checks one JSON value of any kind at the cursor: RFC 8259 syntax,
// valid UTF-8, and no duplicate member name in any object (RFC 7493, as
// the codec checks by default).
func (s *Scanner) Value(depth int) bool {
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
		if s.Peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.Value(depth + 1) {
				return false
			}
			more, ok := s.Next(']')
			if !ok {
				return false
			}
			if !more {
				return true
			}
		}
	case '"':
		_, _, ok := s.Str()
		return ok
	case 't':
		return s.Literal("true")
	case 'f':
		return s.Literal("false")
	case 'n':
		return s.Literal("null")
	default:
		return s.number()
	}
}

func (s *Scanner) object(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++ // '{'
	s.ws()
	if s.Peek() == '}' {
		s.i++
		return true
	}
	var names [maxScanMembers][]byte
	n := 0
	for {
		name, ok := s.Name()
		if !ok || n == maxScanMembers {
			return false
		}
		if s.deep != nil && s.deep.Has(name) {
			return false
		}
		for _, prev := range names[:n] {
			if string(prev) == string(name) {
				return false
			}
		}
		names[n] = name
		n++
		if !s.Value(depth) {
			return false
		}
		more, ok := s.Next('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// Literal reads lit (true, false or null) at the cursor.
func (s *Scanner) Literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number checks the RFC 8259 number grammar.
func (s *Scanner) number() bool {
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

// Members reads a non-empty object at the cursor, handing each member name
// to member, which reads the value and returns the member's bit, or
// ok = false for a value it does not take. Bit 0 is an unknown member
// (E5): Members skips its value, checked like any value and clear of
// the names forbidden inside it (SetRules). A duplicate or a forbidden
// member ends the read too, and the codec decides.
func (s *Scanner) Members(member func(name []byte) (bit uint, ok bool)) bool {
	if !s.Eat('{') {
		return false
	}
	var seen uint
	var unknown UnknownNames
	for {
		name, ok := s.Name()
		if !ok {
			return false
		}
		bit, ok := member(name)
		switch {
		case !ok:
			return false
		case bit == 0:
			if (s.forbid != nil && s.forbid.Has(name)) || !unknown.Add(name) || !s.Value(1) {
				return false
			}
		case seen&bit != 0:
			return false
		}
		seen |= bit
		more, ok := s.Next('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// maxUnknownNames bounds the unknown members one object of the fast path
// takes; more go to the codec.
const maxUnknownNames = 8

// UnknownNames remembers the unknown member names of one object, to
// refuse a duplicate without an allocation.
type UnknownNames struct {
	names [maxUnknownNames][]byte
	n     int
}

// Add records name; false for a repeat or one too many.
func (u *UnknownNames) Add(name []byte) bool {
	if u.n == maxUnknownNames {
		return false
	}
	for _, prev := range u.names[:u.n] {
		if string(prev) == string(name) {
			return false
		}
	}
	u.names[u.n] = name
	u.n++
	return true
}
