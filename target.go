package imv2

import "context"

// Target is where complete messages go: the IM platform on a Connector (an
// assistant final), the agent runtime on xAgent (a user message, through
// dataplane.ClientConfig.Target). Implement it once; the Channel brings
// acks, dedup, retries and order. A Target receives complete messages only:
// drafts, typing and posting idempotently are capabilities of the connector
// kit's Platform (package connector: Drafter, Editor, Typer,
// IdempotentPlatform, PostChecker), which adapts them for the Channel.
//
// PostMessage returns only after every side effect of the message is done:
// the text and all files (M12). A nil error acks the message accepted; an
// error is read by the error contract (errors.go): NotPosted or RetryAfter
// rejects it retryable, Refused for good (A8, X5), and any other error is
// an outcome unknown, since the side effect may have happened. The Channel
// calls PostMessage at most once per message_id at a time, and never again
// for a message_id it recorded as completed (A6, S6). With a ClaimStore it
// also never calls it again for a message whose earlier call was cut off by
// a crash, unless the platform deduplicates by the idempotency key or
// answers that the message was not posted (the kit's IdempotentPlatform
// and PostChecker, S8). ctx carries the message's idempotency key
// (IdempotencyKey), for a platform that deduplicates.
type Target interface {
	PostMessage(ctx context.Context, channelID string, m *ChatMessage) error
}

// TargetFunc adapts a function to Target.
type TargetFunc func(ctx context.Context, channelID string, m *ChatMessage) error

// PostMessage calls f.
func (f TargetFunc) PostMessage(ctx context.Context, channelID string, m *ChatMessage) error {
	return f(ctx, channelID, m)
}
