package display_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
)

// dedupPlatform deduplicates by the idempotency key and can be asked.
type dedupPlatform struct {
	*rec
	keys map[string]bool
}

func (d *dedupPlatform) Post(ctx context.Context, ch string, m *imv2.ChatMessage) error {
	k, _ := imv2.IdempotencyKey(ctx)
	if d.keys[k] {
		return nil
	}
	d.keys[k] = true
	return d.rec.Post(ctx, ch, m)
}

func (d *dedupPlatform) PostsIdempotently() bool { return true }

func (d *dedupPlatform) WasPosted(_ context.Context, _, key string) (bool, error) {
	return d.keys[key], nil
}

func TestTarget_S8_PassesPlatformDedupThrough(t *testing.T) {
	var p *dedupPlatform
	tg, r, _ := newTarget(t, func(r *rec) display.Platform {
		p = &dedupPlatform{rec: r, keys: map[string]bool{}}
		return p
	}, display.Options{Mode: display.Buffer})
	require.True(t, tg.PostsIdempotently(), "the platform's capability stays visible through display")

	key := "key-of-c1-m1" // any key: the Channel makes them, display passes them on
	posted, err := tg.WasPosted(context.Background(), "c1", key)
	require.NoError(t, err)
	require.False(t, posted)
	ctx := imv2.WithIdempotencyKey(context.Background(), key)
	for range 2 { // a re-post after a crash carries the same key
		require.NoError(t, tg.PostMessage(ctx, "c1", msg("m1", "hello", 0)))
	}
	require.Equal(t, 1, r.count("send"), "the key reached the platform's Post")
	posted, err = tg.WasPosted(context.Background(), "c1", key)
	require.NoError(t, err)
	require.True(t, posted)
}

func TestTarget_S8_PlatformWithoutDedupCannotTell(t *testing.T) {
	tg, _, _ := newTarget(t, func(r *rec) display.Platform { return sendOnly{r} }, display.Options{})
	require.False(t, tg.PostsIdempotently())
	_, err := tg.WasPosted(context.Background(), "c1", "key-of-c1-m1")
	require.ErrorIs(t, err, errors.ErrUnsupported, "the Channel reads this as: outcome unknown")
}
