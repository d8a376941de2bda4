package xfiles_test

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/xfiles"
)

// FuzzResolveDownloadURL checks what Fetch would request for any
// download_url and base URL: only http or https, never user info; a
// relative download_url stays on the base URL's host, under its path
// prefix, with no dot segment, even once the URL is printed and parsed
// again as an HTTP client does; every refusal is ErrRefusedURL and
// permanent (T4, M6).
func FuzzResolveDownloadURL(f *testing.F) {
	for _, s := range []struct{ base, dl string }{
		{"https://c.example/prefix", "/files/refs/abc?ch=c&exp=1&sig=x"},
		{"https://c.example/prefix/", "files/refs/abc"},
		{"http://127.0.0.1:8787", "https://cdn.example/a.png"},
		{"https://c.example", "/files/refs/%2e%2e/%2e%2e/etc/passwd"},
		{"https://c.example", "/files/refs/..%2f..%2fsecret"},
		{"https://c.example", "//evil.example/x"},
		{"https://c.example", "file:///etc/passwd"},
		{"https://c.example", "javascript:alert(1)"},
		{"https://c.example", "https://user:pw@evil.example/"},
		{"https://c.example", "/files\\..\\..\\x"},
		{"https://c.example/p", "?q=1"},
		{"ftp://c.example", "/x"},
	} {
		f.Add(s.base, s.dl)
	}
	f.Fuzz(func(t *testing.T, base, dl string) {
		u, err := xfiles.ResolveDownloadURL(base, dl)
		if err != nil {
			if !errors.Is(err, xfiles.ErrRefusedURL) || imv2.SafeToRetry(err) {
				t.Fatalf("refusal of %q against %q is %v: want permanent ErrRefusedURL", dl, base, err)
			}
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("%q resolved to scheme %q", dl, u.Scheme)
		}
		if u.User != nil {
			t.Fatalf("%q resolved with user info", dl)
		}
		again, err := url.Parse(u.String())
		if err != nil {
			t.Fatalf("%q resolved to %q, which does not parse: %v", dl, u, err)
		}
		if again.Host != u.Host || again.Scheme != u.Scheme {
			t.Fatalf("%q resolved to %q, printed as another host %q", dl, u.Host, again.Host)
		}
		ref, _ := url.Parse(dl)
		if ref.IsAbs() {
			return
		}
		b, err := xfiles.ParseBaseURL(base)
		if err != nil {
			t.Fatalf("relative %q resolved against an invalid base %q", dl, base)
		}
		if again.Host != b.Host || again.Scheme != b.Scheme {
			t.Fatalf("relative %q left the Connector %q for %q", dl, b.Host, again.Host)
		}
		for _, seg := range strings.Split(b.Path, "/") {
			if seg == "." || seg == ".." {
				return // the base URL is the caller's own configuration, not input
			}
		}
		prefix := strings.TrimSuffix(b.Path, "/") + "/"
		if !strings.HasPrefix(again.Path, prefix) {
			t.Fatalf("relative %q resolved to %q, outside the base path %q", dl, again.Path, prefix)
		}
		for _, seg := range strings.Split(again.Path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("relative %q resolved to %q with a dot segment", dl, again.Path)
			}
		}
		cleanPrefix := strings.TrimSuffix(path.Clean("/"+b.Path), "/") + "/"
		if c := path.Clean(again.Path); !strings.HasPrefix(c+"/", cleanPrefix) {
			t.Fatalf("relative %q escapes the base path once cleaned: %q", dl, c)
		}
	})
}
