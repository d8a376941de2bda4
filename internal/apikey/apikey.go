// Package apikey is the one parser and checker of "Authorization: Bearer
// <key>" shared by the HTTP kit (connector) and the data plane
// (dataplane), so the two never disagree on which headers carry the key.
package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xagentkit/imv2/clock"
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

// Key checks Authorization headers against the configured key. It keeps
// only the key's SHA-256 digest: comparing fixed-size digests in constant
// time leaks neither the key's length nor its content, and the key itself
// is not held where a log or a debugger print could show it. A rotated key
// (Rotate) leaves the previous one valid for a grace, so the peers using it
// can move over without a refused connection. Copies of a Key share its
// state. The zero Key is unset and allows everything.
type Key struct {
	p *atomic.Pointer[keyState]
}

// keyState is one configured key and the previous one with its end.
type keyState struct {
	digest    [sha256.Size]byte
	prev      [sha256.Size]byte
	prevUntil time.Time // zero: no previous key
	clock     clock.Clock
}

// New returns the Key of key; an empty key is unset.
func New(key string) Key {
	if key == "" {
		return Key{}
	}
	k := Key{p: new(atomic.Pointer[keyState])}
	k.p.Store(&keyState{digest: sha256.Sum256([]byte(key)), clock: clock.System{}})
	return k
}

// WithClock returns k reading the time of its grace from c (a test's
// fake clock); k is unchanged.
func (k Key) WithClock(c clock.Clock) Key {
	if k.p == nil || c == nil {
		return k
	}
	st := *k.p.Load()
	st.clock = c
	k.p.Store(&st)
	return k
}

// Set reports whether a key is configured.
func (k Key) Set() bool { return k.p != nil }

// Rotate makes key the configured key and keeps the current one valid
// for grace more. A Key that was unset stays unset (a Connector without a
// key does not get one by a reload), as does an empty key: both are
// refused with an error.
func (k Key) Rotate(key string, grace time.Duration) error {
	if k.p == nil {
		return errors.New("apikey: no key is configured; a rotation cannot set one")
	}
	if key == "" {
		return errors.New("apikey: the new key is empty")
	}
	for {
		old := k.p.Load()
		next := &keyState{digest: sha256.Sum256([]byte(key)), prev: old.digest, prevUntil: old.clock.Now().Add(grace), clock: old.clock}
		if next.digest == old.digest { // the same key again: nothing to rotate
			next.prev, next.prevUntil = old.prev, old.prevUntil
		}
		if k.p.CompareAndSwap(old, next) {
			return nil
		}
	}
}

// Allow reports whether an Authorization header value passes: always when
// no key is configured, else only a Bearer credential equal to the key,
// or to the previous key within its grace. The digest comparisons run
// whether or not the header parsed or a previous key exists, so a
// malformed header costs the same time as a wrong key.
func (k Key) Allow(header string) bool {
	if k.p == nil {
		return true
	}
	st := k.p.Load()
	token, ok := Token(header)
	got := sha256.Sum256([]byte(token))
	match := subtle.ConstantTimeCompare(got[:], st.digest[:]) == 1
	prev := subtle.ConstantTimeCompare(got[:], st.prev[:]) == 1 && !st.prevUntil.IsZero() && st.clock.Now().Before(st.prevUntil)
	return ok && (match || prev)
}
