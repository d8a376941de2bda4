package imv2

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
)

// idempotencyKeyLen is the length of an idempotency key: 24 characters,
// within Discord's 25-character nonce and any Matrix transaction ID.
const idempotencyKeyLen = 24

// keyEncoding is lowercase base32 without padding: letters and digits only,
// so a key fits any platform's nonce or transaction-ID syntax.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// IdempotencyKeyOf returns the idempotency key of a message: the first 120
// bits of the SHA-256 of the length-prefixed channel and message IDs,
// base32 (idempotencyKeyLen characters). Every attempt to post one
// message_id of one channel, in any process and after any restart, carries
// the same key, so a platform that deduplicates by a client-chosen ID
// (Matrix transaction IDs, Discord nonces, Slack client_msg_id) shows the
// message once however often it is posted.
func IdempotencyKeyOf(channelID, messageID string) string {
	var buf [256]byte // IDs are short: no allocation but the key's
	b := binary.BigEndian.AppendUint64(buf[:0], uint64(len(channelID)))
	b = append(b, channelID...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(messageID)))
	b = append(b, messageID...)
	sum := sha256.Sum256(b)
	var key [idempotencyKeyLen]byte
	keyEncoding.Encode(key[:], sum[:15])
	return string(key[:])
}

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns ctx carrying key; the Channel calls it on the
// context it passes to Target.PostMessage. A wrapper Target that calls
// another one passes its context on and the key goes with it.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// IdempotencyKey returns the key of the message being posted, read from the
// context the Channel passed to Target.PostMessage. The key is a function
// of the channel and message IDs only (24 characters, letters and digits),
// so a resend after a crash carries the same one. A Target posting to a platform
// that deduplicates passes it on as the platform's transaction ID or nonce.
func IdempotencyKey(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(idempotencyKeyCtx{}).(string)
	return k, ok
}
