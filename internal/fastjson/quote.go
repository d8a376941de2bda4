package fastjson

import "github.com/go-json-experiment/json/jsontext"

// AppendQuote is jsontext.AppendQuote: a string with nothing to escape
// (IDs, names, most text) is appended as it is between quotes, without
// the codec's pass over each byte.
func AppendQuote(dst []byte, s string) ([]byte, error) {
	if plainString(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"'), nil
	}
	return jsontext.AppendQuote(dst, s)
}

// Quote is AppendQuote for the hand-written encoders, which fall back to
// the codec on any error: ok is false for invalid UTF-8.
func Quote(dst []byte, s string) ([]byte, bool) {
	out, err := AppendQuote(dst, s)
	return out, err == nil
}
