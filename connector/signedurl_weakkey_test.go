package connector

import (
	"crypto/hkdf"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSigner_T3_WeakAPIKeyNeverSignsURLs (issue 26, attack 4): with no
// URLKey and a short API key ("zebra", recovered offline from a URL's
// signature in 46 s), the URL key is random, so a URL's signature does
// not follow from the API key: two signers with the same weak key (a
// restart) differ, and neither is the HKDF of the API key a guesser would
// compute. An API key of minDerivedAPIKey bytes or more is still the
// source, so replicas sharing it verify each other's URLs. Before, the
// key was HKDF("zebra") in every process.
func TestSigner_T3_WeakAPIKeyNeverSignsURLs(t *testing.T) {
	guess, err := hkdf.Key(sha256.New, []byte("zebra"), nil, URLKeyInfo, 32)
	require.NoError(t, err)
	a, err := newSigner(nil, "zebra")
	require.NoError(t, err)
	b, err := newSigner(nil, "zebra")
	require.NoError(t, err)
	require.NotEqual(t, guess, a.key[:], "the URL key is not derived from a weak API key")
	require.NotEqual(t, a.key, b.key, "random per signer")

	strong := "k7Qx2mVz9LpR4tWc8NsJ1e" // 22 characters
	c, err := newSigner(nil, strong)
	require.NoError(t, err)
	d, err := newSigner(nil, strong)
	require.NoError(t, err)
	require.Equal(t, c.key, d.key, "replicas sharing a long API key agree")
}
