package consolebridge

import (
	"strings"
	"unicode/utf8"
)

// termFilter removes terminal control sequences from text xAgent sent
// before the pretty mode prints it: an escape sequence in a reply could
// otherwise retitle the window (OSC), clear or repaint the screen and
// move the cursor over earlier lines (CSI), or write to the clipboard (OSC
// 52). It drops ESC sequences (CSI, OSC, DCS, SOS, PM, APC and the
// two-character ones), their 8-bit C1 forms, and every other C0 or C1
// control but newline and tab; invalid UTF-8 becomes U+FFFD. Its output
// holds no control character but "\n" and "\t", however the input is cut.
//
// It keeps its state between calls, so a sequence split across two deltas
// is removed whole: clean(a) + clean(b) == clean(a + b) for a cut at a
// rune boundary. An unterminated string sequence (OSC …) swallows the
// rest of the text, as a terminal would.
type termFilter struct{ state uint8 }

const (
	termGround   = iota
	termEscape   // after ESC
	termEscInter // ESC and intermediate bytes, until a final byte
	termCSI      // CSI parameters and intermediates, until a final byte
	termString   // OSC, DCS, SOS, PM, APC body, until BEL or ST
	termStrEsc   // ESC inside a string: ST when "\" follows
)

// clean returns s without control sequences, continuing from the state
// the previous call ended in.
func (f *termFilter) clean(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if f.step(r) {
			b.WriteRune(r) // RuneError writes U+FFFD
		}
		i += size
	}
	return b.String()
}

// step advances the state by r and reports whether r is printed.
func (f *termFilter) step(r rune) bool {
	for {
		switch f.state {
		case termGround:
			switch {
			case r == 0x1b:
				f.state = termEscape
			case r == 0x9b: // 8-bit CSI
				f.state = termCSI
			case r == 0x90 || r == 0x98 || r == 0x9d || r == 0x9e || r == 0x9f: // DCS SOS OSC PM APC
				f.state = termString
			case r == '\n' || r == '\t':
				return true
			case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			default:
				return true
			}
			return false
		case termEscape:
			switch {
			case r == '[':
				f.state = termCSI
			case r == ']' || r == 'P' || r == 'X' || r == '^' || r == '_':
				f.state = termString
			case r == 0x1b:
			case r >= 0x20 && r <= 0x2f:
				f.state = termEscInter
			case r >= 0x30 && r <= 0x7e:
				f.state = termGround // a two-character sequence
			default:
				f.state = termGround // not a sequence: the ESC alone is dropped
				continue
			}
			return false
		case termEscInter:
			switch {
			case r >= 0x20 && r <= 0x2f:
			case r >= 0x30 && r <= 0x7e:
				f.state = termGround
			default:
				f.state = termGround
				continue
			}
			return false
		case termCSI:
			switch {
			case r >= 0x20 && r <= 0x3f:
			case r >= 0x40 && r <= 0x7e:
				f.state = termGround
			default: // a broken sequence ends; r is read afresh
				f.state = termGround
				continue
			}
			return false
		case termString:
			switch r {
			case 0x07, 0x9c, 0x18, 0x1a: // BEL, ST; CAN and SUB abort
				f.state = termGround
			case 0x1b:
				f.state = termStrEsc
			}
			return false
		case termStrEsc:
			if r == '\\' {
				f.state = termGround
				return false
			}
			f.state = termEscape // ESC ends the string and starts a sequence
			continue
		}
		f.state = termGround
	}
}

// cleanTerm returns s without control sequences (one whole string).
func cleanTerm(s string) string {
	var f termFilter
	return f.clean(s)
}
