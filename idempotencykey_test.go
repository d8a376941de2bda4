package imv2

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdempotencyKeyOf_S8_StableAndUnambiguous(t *testing.T) {
	k := IdempotencyKeyOf("cch_1", "msg_1")
	require.Equal(t, k, IdempotencyKeyOf("cch_1", "msg_1"), "the same message always has the same key")
	require.Len(t, k, idempotencyKeyLen)
	require.Regexp(t, regexp.MustCompile(`^[a-z2-7]+$`), k, "fits a nonce or transaction ID")
	// Pinned: a key that changed between releases would let a platform
	// show a message posted before the upgrade again.
	require.Equal(t, "ghbz3mjvepneq2rk23vytx5z", k)
	seen := map[string]string{k: "cch_1/msg_1"}
	for _, p := range [][2]string{{"cch_", "1msg_1"}, {"cch_1m", "sg_1"}, {"cch_2", "msg_1"}, {"cch_1", "msg_2"}, {"", "cch_1msg_1"}} {
		k := IdempotencyKeyOf(p[0], p[1])
		require.NotContains(t, seen, k, "%q/%q collides with %s", p[0], p[1], seen[k])
		seen[k] = p[0] + "/" + p[1]
	}
}

func TestIdempotencyKey_FromContext(t *testing.T) {
	_, ok := IdempotencyKey(context.Background())
	require.False(t, ok)
	got, ok := IdempotencyKey(WithIdempotencyKey(context.Background(), "k1"))
	require.True(t, ok)
	require.Equal(t, "k1", got)
}
