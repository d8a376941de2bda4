// Package apikey is the one parser and checker of "Authorization: Bearer
// <key>" shared by the HTTP kit (connector) and the data plane
// (dataplane), so the two never disagree on which headers carry the key.
package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// Token returns the credentials of a Bearer Authorization header value.
// The grammar is RFC 9110 §11.4 and RFC 6750 §2.1: credentials = "Bearer"
// 1*SP token, the scheme matched case-insensitively. One or more spaces
// separate scheme and token ("Bearer  K" carries "K"); any other
// separator, an empty token or another scheme is not a Bearer credential.
// The rest of the value is the token verbatim (net/http has already
// trimmed the surrounding whitespace of the field value).
func Token(header string) (string, bool) {
	const scheme = "bearer"
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) || header[len(scheme)] != ' ' {
		return "", false
	}
	token := strings.TrimLeft(header[len(scheme):], " ")
	if token == "" {
		return "", false
	}
	return token, true
}

// Key checks Authorization headers against one configured key. It keeps
// only the key's SHA-256 digest: comparing fixed-size digests in constant
// time leaks neither the key's length nor its content, and the key itself
// is not held where a log or a debugger print could show it. The zero Key
// is unset and allows everything.
type Key struct {
	digest [sha256.Size]byte
	set    bool
}

// New returns the Key of key; an empty key is unset.
func New(key string) Key {
	if key == "" {
		return Key{}
	}
	return Key{digest: sha256.Sum256([]byte(key)), set: true}
}

// Set reports whether a key is configured.
func (k Key) Set() bool { return k.set }

// Allow reports whether an Authorization header value passes: always when
// no key is configured, else only a Bearer credential equal to the key.
// The digest comparison runs whether or not the header parsed, so a
// malformed header costs the same time as a wrong key.
func (k Key) Allow(header string) bool {
	if !k.set {
		return true
	}
	token, ok := Token(header)
	got := sha256.Sum256([]byte(token))
	match := subtle.ConstantTimeCompare(got[:], k.digest[:]) == 1
	return ok && match
}
