package connector

import (
	"fmt"
	"time"

	"github.com/xagentkit/imv2/connector/internal/display"
)

// Mode is how the kit shows a message while it streams (D8, K5): one of
// the strategies below, picked by Options.Mode. In every mode a channel's
// replies keep the order xAgent sent them in (Pace, "Send order").
type Mode uint8

// The display strategies.
const (
	// ModeAuto picks from the platform's capabilities: ModeStream for a
	// Drafter (also when it is an Editor too), else ModeEdit for an
	// Editor, else ModeBuffer.
	ModeAuto Mode = iota
	// ModeStream hands every draft to Drafter.Draft at once; the final
	// goes to Post with Message.Draft set, or to Finish for a Finisher.
	ModeStream
	// ModeEdit posts the first draft with Editor.PostDraft and edits it
	// at most once per Display.Interval with the newest text; the final
	// goes to Finish for a Finisher, else it is one more Edit (to exactly
	// the final text) plus, when it has files, a Post of the files.
	ModeEdit
	// ModeBuffer shows nothing temporary: one Post per message, with the
	// final's text and files.
	ModeBuffer
)

// String returns the mode's name: auto, stream, edit or buffer.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeStream:
		return "stream"
	case ModeEdit:
		return "edit"
	case ModeBuffer:
		return "buffer"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// internal is m as the display machinery numbers it (alike but for
// ModeAuto, which New resolves first; TestMode_NumberedAsTheMachinery
// checks it).
func (m Mode) internal() display.Mode { return display.Mode(m) }

// Display tunes how drafts and typing are shown. Every field is optional:
// zero takes the default named beside it; a negative value fails New,
// except where a field says what it means.
type Display struct {
	// Interval is the least time between two PostDraft/Edit calls of one
	// message in ModeEdit; drafts in between are coalesced into the next
	// edit. Default 500 ms.
	Interval time.Duration
	// MaxDrafts caps the drafts open at once over all channels; beyond it
	// a new message gets no draft and is shown by its final alone.
	// Default 1,024.
	MaxDrafts int
	// DraftTTL drops a draft that got no update for this long (Discarder
	// removes its temporary message). Default 5 minutes.
	DraftTTL time.Duration
	// TypingRefresh is how often a shown typing indicator is sent again
	// while the activity lasts; keep it below the platform's typing
	// expiry. Default 4 s. Negative: never sent again, for a platform
	// whose typing state lasts until cleared (XMPP chat states, which
	// XEP-0085 forbids repeating).
	TypingRefresh time.Duration
	// MaxTyping caps the channels showing typing at once. Default 1,024.
	MaxTyping int
	// CallTimeout bounds each platform call made from a timer (a
	// coalesced edit, a typing refresh, a discard), each Unbinder.Unbound
	// and each Releaser.Released. Default 10 s.
	CallTimeout time.Duration
	// MaxTextBytes is the longest text, in bytes, a message of the
	// platform holds; default no limit. Drafts are cut to it on a rune
	// boundary, and a longer final is rejected retryable=false before
	// the platform is called: it would only fail there, or worse (an
	// XMPP server closes the stream of a client that sends a stanza over
	// its limit).
	MaxTextBytes int
}

// DefaultCallTimeout is Display.CallTimeout's default.
const DefaultCallTimeout = display.DefaultCallTimeout
