package display

import (
	"context"
	"fmt"

	"github.com/xagentkit/imv2"
)

// Platform is the one call every IM platform has: post a complete message.
// A Connector author implements it, plus whichever capability interfaces
// below the platform supports; New finds them by type assertion, the way
// net/http finds http.Flusher.
//
// Post posts m as one new message: m.Text as the whole body and every file
// of m.Files. It returns only after the platform accepted all of it (M12).
// Its error is handed back unchanged to the Channel, so mark it with
// imv2.NotPosted or imv2.Refused to say whether a resend may succeed (A8).
type Platform interface {
	Post(ctx context.Context, channelID string, m *imv2.ChatMessage) error
}

// Draft is what Drafter.Draft receives: the text so far of one assistant
// message, and what is new since the last draft the platform accepted, so
// both replace-style (Telegram sendMessageDraft) and append-style (Slack
// chat.appendStream) APIs are served.
type Draft struct {
	// MessageID is the assistant message the draft belongs to.
	MessageID string
	// Handle is "" on the first draft of a message, and afterwards the
	// handle the first successful Draft returned.
	Handle string
	// Text is the whole text so far.
	Text string
	// Suffix is Text minus the text of the last draft the platform accepted:
	// the whole Text on the first draft or after Reset. A draft that failed
	// is not counted, so the next Suffix carries its text too.
	Suffix string
	// Reset reports that Text does not extend the last accepted text; an
	// append-only API should start the draft over. The Channel's deltas
	// always append (D2), so Reset is false there.
	Reset bool
}

// Drafter is a Platform with a native draft or stream API: every draft goes
// straight to it, unthrottled (mode Stream).
type Drafter interface {
	Platform
	// Draft shows d and returns a handle for the drafted message (a stream
	// ID, a draft ID, a message timestamp), not empty. The handle of the
	// first successful call is passed back in later drafts and in Finish.
	Draft(ctx context.Context, channelID string, d Draft) (handle string, err error)
	// Finish turns the draft handle into the final message m: exactly
	// m.Text as the body (M11) plus every file of m.Files (M12). The rules of
	// Platform.Post apply to its return.
	Finish(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error
}

// Editor is a Platform that can edit a message it posted: the first draft is
// posted as a temporary message, later drafts edit it at most once per
// interval, and the final edits it once more (mode Edit).
type Editor interface {
	Platform
	// Post shows text as a new temporary message and returns its handle
	// (a message or event ID), which Edit and Finish receive. messageID may
	// serve as an idempotency nonce. An error matching ErrSkipDraft (the
	// message may be shown) ends the drafts of messageID: the final goes
	// to Post. Any other error is retried with the next draft.
	PostDraft(ctx context.Context, channelID, messageID, text string) (handle string, err error)
	// Edit replaces the text of the temporary message handle.
	Edit(ctx context.Context, channelID, handle, text string) error
	// Finish turns the temporary message handle into the final message m:
	// exactly m.Text as the body (M11) plus every file of m.Files (M12),
	// without posting a second text message. The rules of Platform.Post
	// apply to its return.
	Finish(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error
}

// Discarder is a Drafter or Editor that can remove a temporary message. It
// is called when a draft is dropped before its final arrived (idle TTL), so
// that a late final does not leave the stale partial text beside it (M11).
// An error wrapping errors.ErrUnsupported says the message cannot be
// removed: it stays shown, and the late final finishes it.
type Discarder interface {
	Discard(ctx context.Context, channelID, handle string) error
}

// Typer is a Platform with a typing indicator, the degrade of chat.activity
// thinking and tool (C5). Typing receives the activity to show:
//
//   - Status thinking, or tool with ToolName (C3): show or refresh the
//     indicator; a platform with a custom status line may name the tool
//     ("searching the web…"), a plain typing API ignores both.
//   - Status idle: clear it (idle, the final, the first displayed delta
//     text or the local timeout, C6, C7); a platform whose typing cannot
//     be cleared returns nil.
//
// It is called again every Options.TypingRefresh while the activity lasts,
// and at once when a snapshot changes the status or the tool name. Its
// errors are logged and never affect a chat message (C8).
type Typer interface {
	Typing(ctx context.Context, channelID string, a imv2.ChatActivity) error
}

// Mode is the delta display strategy.
type Mode uint8

// The display strategies.
const (
	// Auto picks Stream for a Drafter, Edit for an Editor, else Buffer.
	Auto Mode = iota
	// Stream hands every draft to Drafter.Draft and the final to
	// Drafter.Finish (D8).
	Stream
	// Edit posts the first draft with Editor.PostDraft, edits it at most once
	// per Options.Interval with the latest text, and turns it into the final
	// with Editor.Finish (D8, M11).
	Edit
	// Buffer shows no temporary text at all: one Platform.Post per message,
	// with the final's text and files (K5).
	Buffer
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Stream:
		return "stream"
	case Edit:
		return "edit"
	case Buffer:
		return "buffer"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}
