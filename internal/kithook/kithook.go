// Package kithook lets imv2test watch a Connector built with
// connector.New without an exported knob: the kit reports each platform
// call that succeeded, and what it was built with, to a watcher attached
// here. Nothing else may use it; a Connector without a watcher pays one
// atomic load per platform call.
package kithook

import (
	"time"

	"github.com/xagentkit/imv2"
)

// Call is one platform call the kit made and the platform applied.
type Call struct {
	// Op is the call: "final" (Post, or Finish, or the final's edit of a
	// temporary message), "draft" (Drafter.Draft), "post"
	// (Editor.PostDraft), "edit" (Editor.Edit) or "typing" (Typer.Typing).
	Op        string
	ChannelID string
	// MessageID is the assistant message; empty for an edit and typing.
	MessageID string
	// Handle is the draft or temporary message's handle (draft, post,
	// edit).
	Handle   string
	Text     string
	Files    []imv2.File
	Activity imv2.ChatActivity
}

// Kit is what a Connector was built with that a conformance run must
// know: the API key and the bounds the checks of K6.c and K12.d observe
// (zero: the default).
type Kit struct {
	APIKey                                    string
	DeltaIdleTTL, DeltaSweep, ActivityTimeout time.Duration
	// Typing reports whether the platform has a typing indicator.
	Typing bool
	// Platform is the platform the Connector was built around; Listener
	// reports whether it reads its conversations itself (a
	// connector.Listener), so a user's messages reach the kit only
	// through it.
	Platform any
	Listener bool
}

// Set once by package connector's init, never changed afterwards (so
// reading them needs no lock): Watch attaches f to the Connector k (nil
// detaches) and reports whether k is one; Describe says what k was built
// with.
var (
	Watch    func(k any, f func(Call)) bool
	Describe func(k any) (Kit, bool)
)
