// Package port holds what the Channel (package imv2) finds on its Target by
// type assertion beyond PostMessage: showing drafts and activity, and
// settling a post whose outcome is unknown. It is no author surface. A
// Connector author implements package connector's Platform and its
// capabilities (Drafter, Editor, Typer, IdempotentPlatform, PostChecker);
// the kit adapts them to these (connector/outbound.go, and the display
// machinery in connector/internal/display), so the verbs an author sees
// exist once. The interfaces live here, not in package imv2, so that the
// public API has one Target, and outside it so that the kit can assert at
// compile time that its Target still has them.
//
// Their errors follow the error contract of package imv2 (errors.go).
package port

import "context"

// StreamingTarget shows assistant text while it streams (D8): the first
// UpdateDraft of a message creates its draft, later ones update it, and the
// final's PostMessage replaces it with the final text (M11). A Target
// without it gets one PostMessage per message and no temporary text (K5).
//
// UpdateDraft receives the whole text so far, not the increment, so a slow
// platform can skip intermediate drafts. An error is logged and the stream
// goes on: the final carries the whole text anyway. An error matching
// errors.ErrUnsupported says the message is not shown before its final
// (the kit's buffer mode), so the Channel holds its final in its place
// instead (package imv2, "Order").
type StreamingTarget interface {
	UpdateDraft(ctx context.Context, channelID, messageID, text string) error
}

// ActivityTarget shows what the agent is doing (C5): SetActivity receives
// thinking or tool while the agent works and idle to clear. Errors are
// logged and never affect a chat message (C8). A is imv2.ChatActivity,
// a type parameter only because package imv2 imports this one.
type ActivityTarget[A any] interface {
	SetActivity(ctx context.Context, channelID string, a A) error
}

// IdempotentTarget reports true when posting a message again with the same
// idempotency key (imv2.IdempotencyKey) shows nothing new: the platform
// deduplicates by it. After a crash or an unmarked error left a message's
// outcome unknown, the Channel posts it again only to such a Target, or to
// a PostCheckTarget that answers "not posted" (S8). It is a method, not a
// marker, so that a wrapper can pass on the answer of what it wraps.
type IdempotentTarget interface {
	PostsIdempotently() bool
}

// PostCheckTarget reports whether a message with this idempotency key was
// posted on the channel (the platform can be searched by it). A Target
// whose platform cannot tell returns an error wrapping
// errors.ErrUnsupported; any error leaves the outcome unknown.
type PostCheckTarget interface {
	WasPosted(ctx context.Context, channelID, key string) (bool, error)
}
