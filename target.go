package imv2

import "context"

// Target is where complete messages go: the IM platform on a Connector (an
// assistant final), the agent runtime on xAgent (a user message). Implement
// it once; the Channel brings acks, dedup, retries and streaming.
//
// PostMessage returns only after every side effect of the message is done:
// the text and all files (M12). A nil error acks the message accepted; an
// error is read by the error contract (errors.go): NotPosted or RetryAfter
// rejects it retryable, Refused for good (A8, X5), and any other error is
// an outcome unknown, since the side effect may have happened. The Channel
// calls PostMessage at most once per message_id at a time, and never again
// for a message_id it recorded as completed (A6, S6). With a ClaimStore it
// also never calls it again for a message whose earlier call was cut off by
// a crash, unless the Target is an IdempotentTarget or a PostCheckTarget
// that answers "not posted" (S8). ctx carries the message's idempotency
// key (IdempotencyKey), for a platform that deduplicates.
type Target interface {
	PostMessage(ctx context.Context, channelID string, m *ChatMessage) error
}

// TargetFunc adapts a function to Target.
type TargetFunc func(ctx context.Context, channelID string, m *ChatMessage) error

// PostMessage calls f.
func (f TargetFunc) PostMessage(ctx context.Context, channelID string, m *ChatMessage) error {
	return f(ctx, channelID, m)
}

// StreamingTarget is a Target that can show assistant text while it streams
// (D8): the first delta creates one draft, later deltas update it, and the
// final's PostMessage replaces it with the final text (M11). A Target
// without it gets one PostMessage per message and no temporary text (K5).
//
// UpdateDraft receives the whole text so far, not the increment, so a slow
// platform can skip intermediate drafts; an append-style API can send the
// new suffix itself. An error is logged and the stream goes on: the final
// will carry the whole text anyway.
type StreamingTarget interface {
	Target
	UpdateDraft(ctx context.Context, channelID, messageID, text string) error
}

// ActivityTarget is a Target that can show what the agent is doing (C5).
// SetActivity receives thinking or tool while the agent works and idle to
// clear. Errors are logged and never affect a chat message (C8).
type ActivityTarget interface {
	Target
	SetActivity(ctx context.Context, channelID string, a ChatActivity) error
}
