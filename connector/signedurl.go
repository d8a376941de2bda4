package connector

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// MinURLKeyBytes is the shortest HandlerConfig.URLKey accepted: 256 bits, the
// strength of the HMAC-SHA256 signature.
const MinURLKeyBytes = 32

// URLKeyInfo is the HKDF-SHA256 info string (no salt) that derives the
// download-URL signing key from the API key when HandlerConfig.URLKey is unset.
// It is fixed so that every process holding the same API key — a
// restarted Connector, its replicas — signs the same way; changing it
// would invalidate every outstanding URL.
const URLKeyInfo = "xagent.im.v2 connector download-url signing key v1"

// signer makes and checks the signed download URLs of T3: HMAC-SHA256 over
// the file_ref, the channel and the expiry under a 256-bit key. See the
// package doc for why a signature and not a token table, and newSigner for
// where the key comes from.
type signer struct {
	key [32]byte
}

// minDerivedAPIKey is the shortest API key the URL key is derived from
// when HandlerConfig.URLKey is unset: 22 characters, the shortest printable form
// (base64) of 128 random bits. A URL carries every signed value, so its
// signature lets anyone who sees it test API key guesses offline; a
// shorter key is too few bits to stand that.
const minDerivedAPIKey = 22

// newSigner returns the signer whose key is HKDF-SHA256 (no salt, info
// URLKeyInfo) of the explicit key (at least MinURLKeyBytes), else of
// apiKey if it has at least minDerivedAPIKey bytes; otherwise the key is
// random and URLs die with the process (and do not verify on a replica):
// a short API key is not refused, as Connectors run with one, but never
// signs a URL. Length is no proof of randomness: with a guessable API key
// of any length, set HandlerConfig.URLKey.
func newSigner(key []byte, apiKey string) (*signer, error) {
	s := new(signer)
	secret := key
	switch {
	case key != nil && len(key) < MinURLKeyBytes:
		return nil, fmt.Errorf("connector: HandlerConfig.URLKey is %d bytes, at least %d are needed", len(key), MinURLKeyBytes)
	case key == nil && len(apiKey) < minDerivedAPIKey:
		_, _ = rand.Read(s.key[:]) // crypto/rand.Read never fails (Go 1.24+)
		return s, nil
	case key == nil:
		secret = []byte(apiKey)
	}
	k, err := hkdf.Key(sha256.New, secret, nil, URLKeyInfo, len(s.key))
	if err != nil {
		return nil, fmt.Errorf("connector: derive the URL signing key: %w", err)
	}
	copy(s.key[:], k)
	return s, nil
}

// sigLen is the length of an unpadded base64url HMAC-SHA256.
var sigLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// mac signs the three fields, each length-prefixed so no two distinct
// triples share an input.
func (s *signer) mac(fileRef, channelID string, exp int64) []byte {
	m := hmac.New(sha256.New, s.key[:])
	var n [8]byte
	m.Write([]byte("imv2-file-url-v1"))
	for _, f := range []string{fileRef, channelID} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	binary.BigEndian.PutUint64(n[:], uint64(exp))
	m.Write(n[:])
	return m.Sum(nil)
}

// url returns the relative download URI of fileRef for channelID, valid
// until exp.
func (s *signer) url(fileRef, channelID string, exp time.Time) string {
	secs := exp.Unix()
	if exp.Nanosecond() > 0 {
		secs++ // never shorter than asked
	}
	q := url.Values{}
	q.Set("ch", channelID)
	q.Set("exp", strconv.FormatInt(secs, 10))
	q.Set("sig", base64.RawURLEncoding.EncodeToString(s.mac(fileRef, channelID, secs)))
	return "/files/refs/" + fileRef + "?" + q.Encode()
}

// urlCheck is the outcome of verify.
type urlCheck int

const (
	urlOK      urlCheck = iota
	urlBadSig           // missing, malformed or wrong signature: 403
	urlExpired          // signature good, expiry passed: 404
)

// verify checks a request's query against fileRef: the signature first, in
// constant time with hmac.Equal, then the expiry. It returns the channel the
// URL was signed for.
func (s *signer) verify(fileRef string, q url.Values, now time.Time) (string, urlCheck) {
	ch, expStr, sig := q.Get("ch"), q.Get("exp"), q.Get("sig")
	if !validChannelID(ch) || len(sig) != sigLen {
		return "", urlBadSig
	}
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || exp <= 0 {
		return "", urlBadSig
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(fileRef, ch, exp)) {
		return "", urlBadSig
	}
	if now.Unix() >= exp {
		return "", urlExpired
	}
	return ch, urlOK
}
