// Package display is the kit's machinery for showing streamed assistant
// messages and agent activity. connector/outbound.go adapts an author's
// connector.Platform and capabilities to this package's Platform, and New
// turns that into the Channel's Target: an imv2.Target with the drafts and
// activity of package internal/port. It is internal and restates no
// author vocabulary: what each platform call means is documented once, in
// package connector.
//
// # Strategies (D8, M11, M13, K5)
//
// The kit picks the Mode (connector.Options.Mode, or from the author's
// capabilities):
//
//   - Stream: every draft goes to Platform.Draft at once, with the whole
//     text and the suffix new since the last accepted draft; the final
//     goes to Platform.Finish.
//   - Edit: the first draft is posted as a temporary message
//     (Platform.PostDraft), later drafts edit it at most once per
//     Options.Interval, drafts in between coalesced into one edit with the
//     newest text; the final goes to Platform.Finish on that same message,
//     never posting a second one.
//   - Buffer: no temporary text; one Platform.Post per message with the
//     final's text and files.
//
// In every mode a final without a shown draft is sent with Platform.Post,
// and the text the platform shows last is the final's text.
//
// # Activity (C5–C8)
//
// chat.activity thinking and tool show the platform's typing indicator
// (Platform.Typing), with the status and the tool name; a changed status
// or tool is shown at once, and the indicator is refreshed while it
// lasts, since platform typing expires (5 s on Telegram, 10 s on
// Discord). Idle, the final, the first displayed delta text or the local
// timeout clear it (Typing gets status idle). A Typing error is logged
// and never fails a message.
//
// # Bounds and defaults
//
// State keyed by remote input is capped and expires:
//
//   - Interval 500 ms between two PostDraft/Edit calls of one message (Edit).
//   - MaxDrafts 1024 drafts open at once over all channels. A new message
//     beyond the cap is refused a draft (UpdateDraft returns an *imv2.Error
//     with code delta_limit_exceeded wrapping ErrFull) and shown by its final
//     alone; open drafts are never evicted, since that would orphan their
//     temporary message and show the text twice (M11).
//   - DraftTTL 5 min: a draft with no update for that long is dropped, and
//     its temporary message removed (Platform.Discard); a final arriving
//     later is then sent as a new message. Where the message cannot be
//     removed (ErrUnsupported, or a failed Discard) its handle is kept (up
//     to MaxDrafts) and a late final finishes it in place, never beside it
//     (M11). A draft is also dropped as soon as its final is accepted (D10).
//   - TypingRefresh 4 s, below Telegram's 5 s typing expiry; negative
//     never refreshes (XMPP chat states last until cleared).
//   - MaxTextBytes none: when set, drafts are cut to it on a rune boundary
//     and a longer final is refused with imv2.Refused, the platform
//     never called; its draft, if shown, goes at DraftTTL.
//   - ActivityTimeout 30 s after the last thinking/tool snapshot (C7).
//   - MaxTyping 1024 channels showing typing at once; beyond it typing is
//     refused (SetActivity returns an error wrapping ErrFull).
//   - CallTimeout 10 s for platform calls made from timers.
//
// Timers use Options.Clock (clock.System by default), so tests drive them
// with fakeclock. Close stops them all.
//
// # Errors
//
// PostMessage returns the platform's error unchanged (the error contract of
// package imv2). A failed final keeps its draft, and the Channel's retry
// finishes the same temporary message. A first PostDraft or Draft error
// matching ErrSkipDraft (outcome unknown) ends that message's drafts
// instead of posting the temporary message again; its final is sent with
// Platform.Post. UpdateDraft and SetActivity errors are for the Channel's
// log only.
package display
