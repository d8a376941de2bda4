package display

import (
	"context"

	"github.com/xagentkit/imv2"
)

// Platform is what a Target calls, by channel ID. It is no author surface:
// its one implementation is the kit's adapter (connector/outbound.go) of
// an author's connector.Platform and capabilities, where each verb is
// documented once (connector.Platform, Drafter, Editor, Finisher, Typer,
// Discarder). The Target's Mode says which calls it makes: Draft and
// Finish (Stream), PostDraft, Edit and Finish (Edit), or Post alone
// (Buffer); Post serves every final without a draft, Typing and Discard
// every mode. Discard answers an error wrapping errors.ErrUnsupported when
// the message cannot be removed (it stays shown, and a late final finishes
// it), Typing nil when the platform has no typing indicator.
type Platform interface {
	Post(ctx context.Context, channelID string, m *imv2.ChatMessage) error
	Draft(ctx context.Context, channelID string, d Draft) (handle string, err error)
	PostDraft(ctx context.Context, channelID, messageID, text string) (handle string, err error)
	Edit(ctx context.Context, channelID, handle, text string) error
	Finish(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error
	Discard(ctx context.Context, channelID, handle string) error
	Typing(ctx context.Context, channelID string, a imv2.ChatActivity) error
}

// Draft is connector.Draft, which the kit converts it to; its fields mean
// what they mean there.
type Draft struct {
	MessageID, Handle, Text, Suffix string
	Reset                           bool
}

// Mode is the display strategy: connector.Mode without ModeAuto, which the
// kit resolves from the author's capabilities before New (same numbers, so
// the kit converts one to the other).
type Mode uint8

// The display strategies; the zero Mode is none and fails New.
const (
	Stream Mode = iota + 1 // Draft for every draft, Finish for the final (D8)
	Edit                   // PostDraft, Edit at most once per Interval, Finish (D8, M11)
	Buffer                 // no temporary text: one Post per message (K5)
)
