package fastjson

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzAppendQuote: AppendQuote and Quote write what jsontext.AppendQuote writes,
// for every string, its plain fast path and the codec's alike.
func FuzzAppendQuote(f *testing.F) {
	for _, s := range []string{"", "msg_0f9c", "a\"b", "back\\slash", "tab\there", "\x00", "\x7f", "中文", "\xff", "12345678", "1234567\"", "<html>&amp;</html>", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, werr := jsontext.AppendQuote([]byte("x"), s)
		got, err := AppendQuote([]byte("x"), s)
		if (err == nil) != (werr == nil) || (werr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("AppendQuote(%q) = %q, %v; jsontext.AppendQuote gives %q, %v", s, got, err, want, werr)
		}
		if got, ok := Quote([]byte("x"), s); ok != (werr == nil) || (ok && !bytes.Equal(got, want)) {
			t.Fatalf("Quote(%q) = %q, %v; jsontext.AppendQuote gives %q, %v", s, got, ok, want, werr)
		}
	})
}
