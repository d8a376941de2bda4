package wiretext

import "testing"

func TestValid(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "",
		"plain":              "plain",
		"中文":                 "中文",
		"GBK \xb4\xed error": "GBK \uFFFD error",
		"\xff":               "\uFFFD",
	} {
		if got := Valid(in); got != want {
			t.Errorf("Valid(%q) = %q, want %q", in, got, want)
		}
	}
}
