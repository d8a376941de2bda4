package connector

import (
	"context"
	"io"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// Platform is the one call every IM platform has: post a complete assistant
// message to a bound conversation. A Connector author implements it, plus
// whichever capability interfaces below the platform has; New finds them by
// type assertion, the way net/http finds http.Flusher.
//
// Post returns only after the platform accepted the text and every file
// (M12). m.Text may be empty: a final of files alone, or (Editor) the
// files of a final whose text went into its draft. Every platform call —
// Post, Finish, Draft, PostDraft, Edit, Typing, Discard — says what the
// platform did with its error, by the one contract of package imv2 (its
// "error contract": nil applied; imv2.NotPosted or imv2.RetryAfter not
// applied; imv2.Refused refused for good; any other error unknown, it may
// have been applied). What the kit does with each:
//
//	outcome       a final                          a draft, edit, typing, discard
//	not applied   made again after a backoff (or   made again the same way
//	              after d), within Pace; then
//	              rejected retryable (A8)
//	refused       rejected retryable=false         not made again
//	unknown       made again only to a PostChecker made again, except a first
//	              that answers "not posted", or to draft (Draft with no handle,
//	              an IdempotentPlatform; else      PostDraft): the message then
//	              delivery_outcome_unknown,        shows no more drafts and its
//	              retryable=false (never shown     final is posted whole, so a
//	              twice)                           lost response never leaves a
//	                                               second temporary message
//
// A RetryAfter also holds the conversation's other calls for d. Retries
// stay within Pace (attempts, backoff) and the Target timeout; when they
// are spent a final is rejected retryable so xAgent sends it again (A8),
// and the channel's later messages wait for it (package imv2, "Order").
type Platform interface {
	Post(ctx context.Context, to Conversation, m *Message) error
}

// Conversation is where a channel's messages go: the channel and the
// platform conversation it is bound to (state.Binding).
type Conversation struct {
	// ChannelID is the connector_channel_id.
	ChannelID string
	// Key is the platform's own conversation ID (a chat ID, a room ID),
	// opaque to the SDK.
	Key string
	// Target is what the binding said about the conversation.
	Target protocol.DescriptorTarget
	// Data is the binding's private platform data (state.Binding.Data): the
	// credentials to post with. Do not modify it.
	Data []byte
}

// Message is what Platform.Post receives: the final and its files, opened.
type Message struct {
	*imv2.ChatMessage
	// Attachments holds one opened file per ChatMessage.Files entry, in
	// order: the kit resolved every file_ref against the channel's uploads
	// before the platform is called (M7, M12) and closes them after Post
	// returns.
	Attachments []OutboundFile
	// IdempotencyKey is stable per connector_channel_id and message_id
	// (S8), for a platform that deduplicates posts by a client token.
	IdempotencyKey string
	// Draft is the handle Drafter.Draft returned for this message's
	// streamed draft, "" when none was shown (M13, mode buffer).
	Draft string
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
	// Suffix is Text minus the text of the last draft the platform
	// accepted: the whole Text on the first draft or after Reset. A draft
	// that failed is not counted, so the next Suffix carries its text too.
	Suffix string
	// Reset reports that Text does not extend the last accepted text; an
	// append-only API should start the draft over.
	Reset bool
}

// OutboundFile is one file of a final, opened from the channel's uploads.
type OutboundFile struct {
	// File is the final's entry as xAgent sent it.
	imv2.File
	// Info is what the store knows of the upload (size, type, expiry).
	Info FileInfo
	// Reader reads the bytes; opened afresh for every attempt of the
	// post and closed by the kit after it.
	io.Reader
}

// Drafter is a Platform with a native draft or stream API (Telegram
// sendMessageDraft, Slack chat.appendStream): every draft goes to Draft
// unthrottled (ModeStream). The final goes to Post with
// Message.Draft set (a draft API whose final is a plain post), or to
// Finish for a Finisher (a stream that must be stopped).
type Drafter interface {
	// Draft shows d and returns a handle for the drafted message, not
	// empty; the first successful call's handle comes back in later drafts
	// (d.Handle) and with the final.
	Draft(ctx context.Context, to Conversation, d Draft) (handle string, err error)
}

// Editor is a Platform that can edit a message it posted (Discord, Teams,
// Matrix): the first draft is posted with PostDraft, later drafts edit it
// at most once per interval with the newest text (ModeEdit).
//
// Without a Finisher the final edits the temporary message to the final
// text — and skips that edit when the last edit already shows exactly the
// final text — and, when the final has files, posts them with Post as a
// message of files and no text; a final of files and no text posts them
// and removes the temporary message (Discarder) — one that cannot be
// removed is edited to "📎" first, never to "", which platforms refuse or
// ignore, leaving the drafted text above a final without it (M11). That
// last Edit is not told apart from a draft's: a platform that must know
// the final (to stop a "typing…" suffix, to un-mark a message as
// temporary) implements Finisher, whose Finish gets the final instead.
//
// A chat whose API can send and edit messages is in edit mode with two
// methods beside Post; the message's ID is the handle:
//
//	func (c *chat) PostDraft(ctx context.Context, to connector.Conversation, _, text string) (string, error) {
//		id, err := c.api.Send(ctx, to.Key, text)
//		if errors.Is(err, api.ErrTooManyRequests) {
//			return "", imv2.RetryAfter(err, time.Second) // not posted: tried again later
//		}
//		return id, err
//	}
//
//	func (c *chat) Edit(ctx context.Context, to connector.Conversation, id, text string) error {
//		return c.api.Edit(ctx, to.Key, id, text)
//	}
type Editor interface {
	// PostDraft shows text as a new temporary message and returns its
	// handle; messageID may serve as a nonce. Errors follow Platform's
	// table: after an "unknown" one the kit shows no draft of the message
	// and posts its final with Post.
	PostDraft(ctx context.Context, to Conversation, messageID, text string) (handle string, err error)
	// Edit replaces the text of the temporary message handle.
	Edit(ctx context.Context, to Conversation, handle, text string) error
}

// Finisher is a Drafter or Editor that turns its draft or temporary
// message handle into the final itself: exactly m.Text plus every file
// (M11, M12). The kit then calls it for every final that had a draft
// shown; the rules of Platform.Post apply.
type Finisher interface {
	Finish(ctx context.Context, to Conversation, handle string, m *Message) error
}

// Typer is a Platform with a typing indicator, the degrade of
// chat.activity (C5). a.Status is thinking or tool (with a.ToolName) to show
// or refresh it, idle to clear it; a platform whose typing cannot be
// cleared returns nil. Typing gets the newest activity only: a status
// superseded before the call is made (thinking sent just before tool, as
// the simulator does) is never shown. Errors are logged and never fail a message (C8),
// but a RetryAfter is the conversation's rate limit, as from any call: the
// conversation's next calls, its drafts and finals too, wait it out.
type Typer interface {
	Typing(ctx context.Context, to Conversation, a imv2.ChatActivity) error
}

// Discarder is a Drafter or Editor that can remove a temporary message
// whose final never came (the draft's idle TTL ran out, M11).
type Discarder interface {
	Discard(ctx context.Context, to Conversation, handle string) error
}

// Releaser is told when the last binding of a conversation key went
// (unbinding, rebinding elsewhere, channel drop, offline-grace expiry):
// the place to stop a shared platform consumer. Bindings are
// reference-counted per key by the store, which decides in the same
// transaction that a change removed the key's last binding
// (state.BindingChange.Released), so Released is called exactly once each time a
// key's count goes to zero, concurrent rebinds included. Another channel
// binding the same key again may be stored before that call arrives; a
// platform that starts its consumer when a sign-in binds a key starts it
// again then. Released runs after the change is stored and the kit's lock
// of the channel is released, so a slow Released holds up no other
// channel; its context is the changing call's, without its cancellation
// (context.Background() for a drop), bounded by Options.Advanced.Display's
// CallTimeout (default 10 s), which Released must honour: a drop waits
// for it, and Close waits for drops.
type Releaser interface {
	Released(ctx context.Context, key string) error
}

// Unbinder is told of every binding that went (auth.logout, a sign-in
// that replaced it, a channel dropped at the end of its offline grace, an
// evicted channel, a sign-in's binding the store refused), one call per
// channel, after the store forgot it and before a Releaser hears of its key:
// the place to drop what the platform keeps per channel, such as its
// credentials. Errors are logged. It runs after the kit's lock of the
// channel is released, with the context and bound Releaser.Released gets,
// so a new binding of the channel may be stored before or while it runs:
// a platform keeping state per channel compares b with what it holds (or
// with Connector.Binding) before dropping it.
type Unbinder interface {
	Unbound(ctx context.Context, b state.Binding) error
}

// IdempotentPlatform is a Platform that deduplicates posts by
// Message.IdempotencyKey: posting the same final again shows nothing new,
// so after a crash the kit may post an interrupted final again (S8), and
// after a failed post it posts again at once (Pace).
type IdempotentPlatform interface {
	PostsIdempotently() bool
}

// PostChecker is a Platform that can tell whether a message with an
// idempotency key was posted to a conversation (a Matrix transaction ID, a
// Discord nonce), so an interrupted final is neither lost nor shown twice:
// the kit asks it after a failed post that may have been applied, and
// before posting the resend of a final whose outcome it could not learn
// (Pace).
type PostChecker interface {
	WasPosted(ctx context.Context, to Conversation, key string) (bool, error)
}
