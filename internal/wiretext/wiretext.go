// Package wiretext makes text that came from a platform or a handler fit
// a packet: the codec refuses invalid UTF-8, and a packet that does not
// encode is an answer never sent.
package wiretext

import (
	"strings"
	"unicode/utf8"
)

// Valid returns s with every run of invalid UTF-8 replaced by U+FFFD (s
// itself when it is valid).
func Valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
