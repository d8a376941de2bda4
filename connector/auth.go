package connector

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// apiKey checks "Authorization: Bearer <key>" (W1, H4, T1). It holds only
// the key's SHA-256 digest: comparing fixed-size digests in constant time
// leaks neither the key's length nor its content, and the key itself is not
// kept where a log or a debugger print could show it.
type apiKey struct {
	digest [sha256.Size]byte
	set    bool
}

func newAPIKey(key string) apiKey {
	if key == "" {
		return apiKey{}
	}
	return apiKey{digest: sha256.Sum256([]byte(key)), set: true}
}

// allow reports whether r may pass: always when no key is configured, else
// only with the right bearer token.
func (k apiKey) allow(r *http.Request) bool {
	if !k.set {
		return true
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	got := sha256.Sum256([]byte(token))
	match := subtle.ConstantTimeCompare(got[:], k.digest[:]) == 1
	return ok && match
}

// bearer extracts the token of a "Bearer" authorization (scheme matched
// case-insensitively, RFC 9110 §11.1).
func bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return strings.TrimSpace(h[len(scheme):]), true
}
