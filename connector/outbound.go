package connector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
	"github.com/xagentkit/imv2/internal/kithook"
	"github.com/xagentkit/imv2/state"
)

// outbound is the display.Platform the kit gives display.New: every call
// resolves the channel's conversation, goes through the pacer and reaches
// the author's Platform and its capabilities. The mode decides which calls
// are made; a capability the author lacks is a no-op (Typing) or
// errors.ErrUnsupported (Discard).
type outbound struct {
	k         *Connector
	p         Platform
	drafter   Drafter
	editor    Editor
	finisher  Finisher
	typer     Typer
	discarder Discarder

	mu sync.Mutex
	// shown is the text each Editor handle shows, for the final-edit
	// skip, by channel: platforms number messages per chat (Telegram's
	// message_id, Slack's ts), so two conversations may both have "1".
	shown map[shownKey]string
}

type shownKey struct{ channel, handle string }

func newOutbound(k *Connector, p Platform) *outbound {
	o := &outbound{k: k, p: p, shown: map[shownKey]string{}}
	o.drafter, _ = p.(Drafter)
	o.editor, _ = p.(Editor)
	o.finisher, _ = p.(Finisher)
	o.typer, _ = p.(Typer)
	o.discarder, _ = p.(Discarder)
	return o
}

// mode is the display mode the author's capabilities allow.
func (o *outbound) mode() display.Mode {
	switch {
	case o.drafter != nil:
		return display.Stream
	case o.editor != nil:
		return display.Edit
	}
	return display.Buffer
}

// call runs f for the channel's conversation under the pacer, retried
// blindly: for drafts, edits, typing, discards, which show nothing new when
// made again.
func (o *outbound) call(ctx context.Context, channelID string, f func(context.Context, Conversation) error) error {
	to, err := o.k.conversation(ctx, channelID)
	if err != nil {
		return err
	}
	return o.k.pace.do(ctx, to.Key, false, func(ctx context.Context) error { return f(ctx, to) })
}

// final runs post with m's files opened afresh for every attempt. The refs
// are checked before the first attempt, so a final naming a file that is
// unknown, expired or another channel's is rejected invalid_packet,
// retryable=false, and the platform is never called (M7, M12). A post
// that was not applied is made again within Pace; one whose outcome is
// unknown is not: its error goes back to the Channel, which decides by
// the error contract (package imv2) with the platform's PostChecker or
// IdempotentPlatform, once, for every Connector.
func (o *outbound) final(ctx context.Context, channelID string, m *imv2.ChatMessage, post func(context.Context, Conversation, *Message) error) error {
	if err := o.checkFiles(ctx, channelID, m); err != nil {
		return err
	}
	to, err := o.k.conversation(ctx, channelID)
	if err != nil {
		return err
	}
	return o.k.pace.do(ctx, to.Key, true, func(ctx context.Context) error {
		msg, closeAll, err := o.open(ctx, channelID, m)
		if err != nil {
			return imv2.NotPosted(err) // nothing reached the platform
		}
		defer closeAll()
		return post(ctx, to, msg)
	})
}

func (o *outbound) checkFiles(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	_, closeAll, err := o.open(ctx, channelID, m)
	if err == nil {
		closeAll()
	}
	return err
}

// open resolves every file_ref of m against the channel's uploads.
func (o *outbound) open(ctx context.Context, channelID string, m *imv2.ChatMessage) (*Message, func(), error) {
	msg := &Message{ChatMessage: m, IdempotencyKey: imv2.IdempotencyKeyOf(channelID, m.MessageID)}
	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
	}
	for _, f := range m.Files {
		rc, info, err := o.k.handler.OpenFile(ctx, channelID, f.FileRef)
		switch {
		case errors.Is(err, ErrFileNotFound), errors.Is(err, ErrWrongChannel):
			closeAll()
			return nil, nil, imv2.Errorf(imv2.CodeInvalidPacket, "file_ref %q was not uploaded to this channel, or expired (M7)", f.FileRef)
		case err != nil:
			closeAll()
			return nil, nil, imv2.NotPosted(fmt.Errorf("opening file_ref %q: %w", f.FileRef, err))
		}
		closers = append(closers, rc)
		msg.Attachments = append(msg.Attachments, OutboundFile{File: f, Info: info, Reader: rc})
	}
	return msg, closeAll, nil
}

// Post implements display.Platform: a final without a draft — or with one
// shown before a restart, whose recorded handle it finishes (M11).
func (o *outbound) Post(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	if o.drafter != nil || o.editor != nil {
		if h, ok := o.recordedDraft(ctx, channelID, m.MessageID); ok {
			return o.Finish(ctx, channelID, h, m)
		}
	}
	err := o.final(ctx, channelID, m, o.p.Post)
	if err == nil {
		o.k.watch.sawFinal(channelID, m)
	}
	return err
}

// Draft implements display.Platform. A later draft only replaces the
// text of the one shown, so it is retried blindly; the first creates the
// drafted message and follows Post's rule below (ErrSkipDraft).
func (o *outbound) Draft(ctx context.Context, channelID string, d display.Draft) (string, error) {
	var h string
	err := o.call(ctx, channelID, func(ctx context.Context, to Conversation) (err error) {
		h, err = o.drafter.Draft(ctx, to, Draft(d))
		if err != nil && d.Handle == "" && !imv2.SafeToRetry(err) {
			return imv2.Refused(fmt.Errorf("connector: %w: %w", display.ErrSkipDraft, err))
		}
		return err
	})
	if err == nil && d.Handle == "" {
		o.rememberDraft(ctx, channelID, d.MessageID, h)
	}
	if err == nil {
		o.k.watch.saw(kithook.Call{Op: "draft", ChannelID: channelID, MessageID: d.MessageID, Handle: h, Text: d.Text})
	}
	return h, err
}

// PostDraft implements display.Platform: the temporary message. Like a final's
// post it is made again only when the platform did not apply it
// (imv2.SafeToRetry); any other failure may have shown
// it (a lost response), and a second PostDraft would leave a second
// temporary message. A draft is not a final: the kit then gives up on it
// (display.ErrSkipDraft, permanent) and the final is posted whole with
// Post, without asking a PostChecker or relying on IdempotentPlatform,
// whose keys are a final's.
func (o *outbound) PostDraft(ctx context.Context, channelID, messageID, text string) (string, error) {
	var h string
	err := o.call(ctx, channelID, func(ctx context.Context, to Conversation) (err error) {
		h, err = o.editor.PostDraft(ctx, to, messageID, text)
		if err != nil && !imv2.SafeToRetry(err) {
			return imv2.Refused(fmt.Errorf("connector: %w: %w", display.ErrSkipDraft, err))
		}
		return err
	})
	if err == nil {
		o.setShown(channelID, h, text)
		o.rememberDraft(ctx, channelID, messageID, h)
		o.k.watch.saw(kithook.Call{Op: "post", ChannelID: channelID, MessageID: messageID, Handle: h, Text: text})
	}
	return h, err
}

// Edit implements display.Platform.
func (o *outbound) Edit(ctx context.Context, channelID, handle, text string) error {
	err := o.call(ctx, channelID, func(ctx context.Context, to Conversation) error {
		return o.editor.Edit(ctx, to, handle, text)
	})
	if err == nil {
		o.setShown(channelID, handle, text)
		o.k.watch.saw(kithook.Call{Op: "edit", ChannelID: channelID, Handle: handle, Text: text})
	}
	return err
}

// Finish implements display.Platform: the final of a
// message whose draft was shown. Once it is shown the draft's record goes.
func (o *outbound) Finish(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error {
	err := o.finish(ctx, channelID, handle, m)
	if err == nil {
		o.k.watch.sawFinal(channelID, m)
		o.forgetDraft(ctx, channelID, func(d state.DraftHandle) bool { return d.MessageID == m.MessageID })
	}
	return err
}

func (o *outbound) finish(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error {
	if o.finisher == nil && o.k.display.Mode() == display.Stream {
		return o.final(ctx, channelID, m, func(ctx context.Context, to Conversation, msg *Message) error {
			msg.Draft = handle
			return o.p.Post(ctx, to, msg)
		})
	}
	if o.finisher != nil {
		return o.final(ctx, channelID, m, func(ctx context.Context, to Conversation, msg *Message) error {
			return o.finisher.Finish(ctx, to, handle, msg)
		})
	}
	if err := o.checkFiles(ctx, channelID, m); err != nil {
		return err
	}
	// The final is the temporary message edited to the final text; when
	// the last coalesced edit already shows it, that edit is skipped. The
	// handle is forgotten however the final ends, so the map never keeps
	// a finished message.
	defer o.setShown(channelID, handle, "")
	if m.Text == "" {
		return o.finishFilesOnly(ctx, channelID, handle, m)
	}
	o.mu.Lock()
	shown, known := o.shown[shownKey{channelID, handle}]
	o.mu.Unlock()
	if !known || shown != m.Text {
		if err := o.Edit(ctx, channelID, handle, m.Text); err != nil {
			return err
		}
	}
	if len(m.Files) > 0 {
		files := *m
		files.Text = ""
		if err := o.final(ctx, channelID, &files, o.p.Post); err != nil {
			// The text is shown, so rejecting the final for good would
			// leave it half delivered: a resend edits the same text again
			// (a no-op on screen) and posts the files — unless the files
			// may be shown already (unknown: the Channel decides).
			if imv2.IsRefused(err) {
				return imv2.NotPosted(err)
			}
			return err
		}
	}
	return nil
}

// filesOnlyDraft is what a temporary message shows when its final has
// files and no text and it cannot be removed: an edit to "" is refused or
// ignored by platforms (XMPP clients keep the old text), which would leave
// the drafted text under a final that does not have it (M11).
const filesOnlyDraft = "📎"

// finishFilesOnly shows a final of files only whose draft was shown: the
// files, then the draft removed (Discarder); without a Discarder, or when
// the removal fails, the draft is edited to filesOnlyDraft first. The
// files posted, a failure to tidy the draft fails nothing: posting the
// final again would show the files twice.
func (o *outbound) finishFilesOnly(ctx context.Context, channelID, handle string, m *imv2.ChatMessage) error {
	if o.discarder == nil {
		if err := o.Edit(ctx, channelID, handle, filesOnlyDraft); err != nil {
			return err
		}
		return o.final(ctx, channelID, m, o.p.Post)
	}
	if err := o.final(ctx, channelID, m, o.p.Post); err != nil {
		return err
	}
	if err := o.Discard(ctx, channelID, handle); err != nil {
		if err := o.Edit(ctx, channelID, handle, filesOnlyDraft); err != nil {
			o.k.log.Warn("connector: the draft of a final of files only was neither removed nor replaced", "connector_channel_id", channelID, "message_id", m.MessageID, "err", err)
		}
	}
	return nil
}

// setShown records the text a handle of the channel shows; "" forgets
// the handle.
func (o *outbound) setShown(channelID, handle, text string) {
	if o.editor == nil || o.finisher != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k := shownKey{channelID, handle}
	if text == "" {
		delete(o.shown, k)
		return
	}
	o.shown[k] = text
}

// Discard implements display.Platform: a draft whose final never came.
// Without the author's Discarder the message stays shown, so its record
// stays too and the error says so (errors.ErrUnsupported): a late final
// finishes that message in place, also after a restart, never posting a
// second one beside it (M11).
func (o *outbound) Discard(ctx context.Context, channelID, handle string) error {
	o.setShown(channelID, handle, "")
	if o.discarder == nil {
		return fmt.Errorf("connector: %T cannot remove a draft: %w", o.p, errors.ErrUnsupported)
	}
	err := o.call(ctx, channelID, func(ctx context.Context, to Conversation) error {
		return o.discarder.Discard(ctx, to, handle)
	})
	if err == nil {
		o.forgetDraft(ctx, channelID, func(d state.DraftHandle) bool { return d.Handle == handle })
	}
	return err
}

// Typing implements display.Platform: thinking, tool with its name, or idle.
func (o *outbound) Typing(ctx context.Context, channelID string, a imv2.ChatActivity) error {
	if o.typer == nil {
		return nil
	}
	err := o.call(ctx, channelID, func(ctx context.Context, to Conversation) error {
		return o.typer.Typing(ctx, to, a)
	})
	if err == nil {
		o.k.watch.saw(kithook.Call{Op: "typing", ChannelID: channelID, Activity: a})
	}
	return err
}

// PostsIdempotently reports whether the author's platform deduplicates by
// the idempotency key (IdempotentPlatform says yes).
func (o *outbound) PostsIdempotently() bool {
	ip, ok := o.p.(IdempotentPlatform)
	return ok && ip.PostsIdempotently()
}

// WasPosted asks the author's PostChecker with the channel's
// conversation; any other platform cannot tell (errors.ErrUnsupported).
func (o *outbound) WasPosted(ctx context.Context, channelID, key string) (bool, error) {
	pc, ok := o.p.(PostChecker)
	if !ok {
		return false, fmt.Errorf("connector: %T cannot tell whether a message was posted: %w", o.p, errors.ErrUnsupported)
	}
	to, err := o.k.conversation(ctx, channelID)
	if err != nil {
		return false, err
	}
	return pc.WasPosted(ctx, to, key)
}
