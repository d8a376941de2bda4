package display

import (
	"context"
	"errors"
	"fmt"

	"github.com/xagentkit/imv2/internal/port"
)

// IdempotentPlatform is a Platform that deduplicates posts by the
// idempotency key the Channel puts in the context of every call it makes
// for a final (imv2.IdempotencyKey(ctx) in Post or Finish): posting the
// same final again shows nothing new. Target passes the answer on as
// port.IdempotentTarget, so after a crash the Channel may post an
// interrupted final again instead of reporting its outcome unknown.
type IdempotentPlatform interface {
	Platform
	PostsIdempotently() bool
}

// PostCheckPlatform is a Platform that can tell whether a message with an
// idempotency key was posted on a channel (it stores the key with the
// message, as a Matrix transaction ID or a Discord nonce). Target passes it
// on as port.PostCheckTarget.
type PostCheckPlatform interface {
	Platform
	WasPosted(ctx context.Context, channelID, key string) (bool, error)
}

var (
	_ port.IdempotentTarget = (*Target)(nil)
	_ port.PostCheckTarget  = (*Target)(nil)
)

// PostsIdempotently implements port.IdempotentTarget with the answer of
// the platform: true only for an IdempotentPlatform that says so. A final
// retried after a restart has no draft left, so it goes to Post with the
// same key; one retried in the same process finishes its own draft, which
// is an edit of one handle and shows nothing twice either.
func (t *Target) PostsIdempotently() bool {
	ip, ok := t.p.(IdempotentPlatform)
	return ok && ip.PostsIdempotently()
}

// WasPosted implements port.PostCheckTarget by asking a PostCheckPlatform.
// Any other platform cannot tell: the error wraps errors.ErrUnsupported.
func (t *Target) WasPosted(ctx context.Context, channelID, key string) (bool, error) {
	pc, ok := t.p.(PostCheckPlatform)
	if !ok {
		return false, fmt.Errorf("display: %T cannot tell whether a message was posted: %w", t.p, errors.ErrUnsupported)
	}
	return pc.WasPosted(ctx, channelID, key)
}
