package tgbridge

// platform.go is the kit's Platform: each method a thin call to the Bot
// API (sendMessage, editMessageText, sendMessageDraft, sendChatAction,
// sendDocument/sendPhoto, deleteMessage).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/mymmrac/telego"
	tu "github.com/mymmrac/telego/telegoutil"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/state"
)

// MaxTextChars is the longest text of one Telegram message, counted as
// Telegram counts it (UTF-16 code units): a longer final is sent as
// several messages, a longer draft is cut.
const MaxTextChars = 4096

// Photos up to this size go by sendPhoto, larger images as documents
// (Telegram's limits: 10 MB for a photo, 50 MB for any upload).
const maxPhotoBytes = 10 << 20

// draftPrefix marks a sendMessageDraft handle; an edit-mode handle is the
// message_id alone.
const draftPrefix = "d"

// Post implements connector.Platform: the text in as many messages as
// MaxTextChars needs, then each file, as one unit.
func (br *Bridge) Post(ctx context.Context, to connector.Conversation, m *connector.Message) error {
	return br.final(ctx, to, draftPrefix, m) // posted as a draft's final is
}

// PostDraft implements connector.Editor: the first draft is a message of
// its own, whose message_id is the handle.
func (br *Bridge) PostDraft(ctx context.Context, to connector.Conversation, _, text string) (string, error) {
	msg, err := br.bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: chatOf(to)}, Text: cut(text)})
	if err != nil {
		return "", mark(err)
	}
	return strconv.Itoa(msg.MessageID), nil
}

// Edit implements connector.Editor with editMessageText; an edit to the
// text shown is no error. Its Turn matters when Finish calls it, after the
// final's trace is written.
func (br *Bridge) Edit(ctx context.Context, to connector.Conversation, handle, text string) error {
	id, _ := strconv.Atoi(handle) // the bridge's own; 0 is refused by Telegram
	if err := connector.Turn(ctx); err != nil {
		return err
	}
	_, err := br.bot.EditMessageText(ctx, &telego.EditMessageTextParams{ChatID: telego.ChatID{ID: chatOf(to)}, MessageID: id, Text: cut(text)})
	if err == nil || notModified(err) {
		return nil
	}
	return mark(err)
}

// Draft implements connector.Drafter with sendMessageDraft (ModeStream,
// chosen when the server has the method): the whole text so far under one
// draft_id. Telegram shows drafts in private chats only, so a group's
// reply is refused a draft and shown by its final alone.
func (br *Bridge) Draft(ctx context.Context, to connector.Conversation, d connector.Draft) (string, error) {
	chat := chatOf(to)
	if chat < 0 { // groups and supergroups have negative IDs
		return "", refused(errors.New("tgbridge: Telegram shows drafts in private chats only"))
	}
	id, err := strconv.Atoi(strings.TrimPrefix(d.Handle, draftPrefix))
	if d.Handle == "" || err != nil {
		id = 1 + rand.IntN(1<<31-1) // draft_id must not be 0
	}
	if err := br.bot.SendMessageDraft(ctx, &telego.SendMessageDraftParams{ChatID: chat, DraftID: id, Text: cut(d.Text)}); err != nil {
		return "", mark(err)
	}
	return draftPrefix + strconv.Itoa(id), nil
}

// Finish implements connector.Finisher: a draft's final is posted (the
// message replaces the draft); an edited message becomes the final's
// first MaxTextChars, and the rest follows as new messages, then the files.
func (br *Bridge) Finish(ctx context.Context, to connector.Conversation, handle string, m *connector.Message) error {
	return br.final(ctx, to, handle, m)
}

// The Bot API has no idempotency key and lets a bot read no chat, so the
// bridge keeps its own trace of each final in the binding's Data (the
// kit's durable store): "on its way" before its first call, "shown" after
// the first call Telegram applied, dropped when that call was refused
// (not applied). The last maxSent finals of a channel are kept.
const maxSent = 64

type sentLog struct {
	Sent []sentKey `json:"sent"`
}

type sentKey struct {
	Key   string `json:"k"`
	Shown bool   `json:"s,omitempty"`
}

// final shows m between the records of its trace: its text (with its
// files' links where the server is known to take no files) in pieces of
// MaxTextChars, the first one by editing the message of an edit-mode
// handle, then its files.
func (br *Bridge) final(ctx context.Context, to connector.Conversation, handle string, m *connector.Message) error {
	if err := br.note(ctx, to.ChannelID, m.IdempotencyKey, 1); err != nil {
		return notPosted(fmt.Errorf("tgbridge: recording a final on its way: %w", err))
	}
	applied := false
	shown := func() {
		applied = true
		if err := br.note(ctx, to.ChannelID, m.IdempotencyKey, 2); err != nil {
			br.cfg.Logger.Warn("tgbridge: a final shown was not recorded; it may be answered delivery_outcome_unknown", "err", err)
		}
	}
	text, linked := m.Text, br.noFiles.Load() && len(m.Attachments) > 0
	for i := 0; linked && i < len(m.Attachments); i++ {
		text += "\n" + br.link(to, m.Attachments[i])
	}
	texts := split(strings.TrimPrefix(text, "\n"), MaxTextChars)
	var err error
	if !strings.HasPrefix(handle, draftPrefix) {
		first := "📎" // Telegram refuses an empty text; the files follow
		if len(texts) > 0 {
			first, texts = texts[0], texts[1:]
		}
		if err = br.Edit(ctx, to, handle, first); err == nil {
			shown()
		}
	}
	if err == nil {
		err = br.deliver(ctx, to, chatOf(to), m, texts, linked, applied, shown)
	}
	if err != nil && !applied && notApplied(err) {
		_ = br.note(ctx, to.ChannelID, m.IdempotencyKey, 0)
	}
	return err
}

// note records key as gone (0), on its way (1) or shown (2).
func (br *Bridge) note(ctx context.Context, channelID, key string, st int) error {
	return br.kit.UpdateBinding(ctx, channelID, func(b *state.Binding) error {
		var l sentLog
		_ = json.Unmarshal(b.Data, &l) // none yet, or not ours: started afresh
		l.Sent = slices.DeleteFunc(l.Sent, func(k sentKey) bool { return k.Key == key })
		if st > 0 {
			l.Sent = append(l.Sent, sentKey{Key: key, Shown: st == 2})
		}
		l.Sent = l.Sent[max(0, len(l.Sent)-maxSent):]
		var err error
		b.Data, err = json.Marshal(l)
		return err
	})
}

// WasPosted implements connector.PostChecker from the trace final keeps:
// shown is posted; no trace (never sent, or refused) is not posted; on
// its way, the call may have been applied unseen (a lost answer, a crash
// mid-call), which Telegram cannot tell — unless the final edits its
// draft, whose making again shows nothing twice: not posted. Else
// errors.ErrUnsupported, and the kit answers delivery_outcome_unknown
// rather than risk a second copy.
func (br *Bridge) WasPosted(ctx context.Context, to connector.Conversation, key string) (bool, error) {
	b, ok, err := br.kit.Binding(ctx, to.ChannelID)
	if err != nil || !ok {
		return false, err
	}
	var l sentLog
	_ = json.Unmarshal(b.Data, &l)
	i := slices.IndexFunc(l.Sent, func(k sentKey) bool { return k.Key == key })
	if i < 0 || l.Sent[i].Shown {
		return i >= 0, nil
	}
	for _, d := range b.Drafts {
		if _, aerr := strconv.Atoi(d.Handle); aerr == nil && imv2.IdempotencyKeyOf(to.ChannelID, d.MessageID) == key {
			return false, nil
		}
	}
	return false, fmt.Errorf("tgbridge: a final was on its way and the Bot API cannot tell whether it was sent: %w", errors.ErrUnsupported)
}

// Discard implements connector.Discarder: a message whose final never
// came is deleted; a draft lapses by itself.
func (br *Bridge) Discard(ctx context.Context, to connector.Conversation, handle string) error {
	id, err := strconv.Atoi(handle)
	if err != nil { // a draft's handle
		return nil
	}
	return mark(br.bot.DeleteMessage(ctx, &telego.DeleteMessageParams{ChatID: telego.ChatID{ID: chatOf(to)}, MessageID: id}))
}

// Typing implements connector.Typer with sendChatAction "typing", which
// Telegram shows for 5 s (the kit refreshes it every 4 s) and clears by
// itself when the reply comes, so idle sends nothing. A server without the
// method is not asked again.
func (br *Bridge) Typing(ctx context.Context, to connector.Conversation, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityIdle || br.noTyping.Load() {
		return nil
	}
	err := br.bot.SendChatAction(ctx, &telego.SendChatActionParams{ChatID: telego.ChatID{ID: chatOf(to)}, Action: telego.ChatActionTyping})
	if unsupported(err) {
		br.noTyping.Store(true)
		br.cfg.Logger.Info("tgbridge: the Bot API server has no sendChatAction; typing is not shown")
		return nil
	}
	return mark(err)
}

// deliver sends texts, then m's files unless linked (texts holds their
// links), to chat as one unit. Once a message of it was shown a failure
// can no longer say "not posted" (the kit would post the shown part
// again), so a rate limit is waited out here and any other failure
// refuses the final for good (rejected retryable=false: xAgent sees it).
func (br *Bridge) deliver(ctx context.Context, to connector.Conversation, chat int64, m *connector.Message, texts []string, linked, shown bool, showing func()) error {
	send := func(call func() error) error {
		for {
			err := connector.Turn(ctx) // after the trace's write; each part a call of its own
			if err == nil {
				err = call()
			}
			d, limited := retryAfter(err)
			switch {
			case errors.Is(err, errNoFiles):
				return err
			case err == nil:
				if !shown {
					showing()
				}
				shown = true
				return nil
			case !shown:
				return mark(err)
			case !limited: // refused: made again, the shown part would show twice
				return refused(fmt.Errorf("tgbridge: part of the reply was shown, the rest failed: %v", err))
			}
			if werr := br.sleep(ctx, d); werr != nil {
				return refused(fmt.Errorf("tgbridge: part of the reply was shown, the rest waits out a rate limit: %v", err))
			}
		}
	}
	for _, t := range texts {
		if err := send(func() error {
			_, err := br.bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: chat}, Text: t})
			return err
		}); err != nil {
			return err
		}
	}
	var links []string
	for _, f := range m.Attachments {
		if linked {
			break
		}
		if br.noFiles.Load() { // learnt from an earlier file of m
			links = append(links, br.link(to, f))
			continue
		}
		err := send(func() error { return br.sendFile(ctx, chat, f) })
		if errors.Is(err, errNoFiles) {
			br.noFiles.Store(true)
			br.cfg.Logger.Info("tgbridge: the Bot API server takes no files; they are sent as download links")
			links = append(links, br.link(to, f))
		} else if err != nil {
			return err
		}
	}
	if len(links) > 0 { // learnt just now: the links go as one more message
		return send(func() error {
			_, err := br.bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: chat}, Text: cut(strings.Join(links, "\n"))})
			return err
		})
	}
	return nil
}

// errNoFiles is sendFile's error where the server has no such method.
var errNoFiles = errors.New("tgbridge: the Bot API server takes no files")

// sendFile sends f by sendPhoto (a small image) or sendDocument.
func (br *Bridge) sendFile(ctx context.Context, chat int64, f connector.OutboundFile) error {
	in := telego.InputFile{File: tu.NameReader(f.Reader, cmp.Or(f.Info.Filename, f.Filename, "file"))}
	mime := cmp.Or(f.Info.MimeType, f.MimeType)
	var err error
	if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" && f.Info.ByteSize <= maxPhotoBytes {
		_, err = br.bot.SendPhoto(ctx, &telego.SendPhotoParams{ChatID: telego.ChatID{ID: chat}, Photo: in})
	} else {
		_, err = br.bot.SendDocument(ctx, &telego.SendDocumentParams{ChatID: telego.ChatID{ID: chat}, Document: in})
	}
	if unsupported(err) {
		return errNoFiles
	}
	return err
}

// link is a file's line in a final's text where the server takes no
// files: its name and the Connector's signed download URL (T3).
func (br *Bridge) link(to connector.Conversation, f connector.OutboundFile) string {
	name := cmp.Or(f.Info.Filename, f.Filename, "file")
	return "📎 " + name + ": " + br.cfg.PublicURL + br.kit.Handler().DownloadURL(to.ChannelID, f.FileRef)
}

// split cuts text into pieces of at most n UTF-16 code units, at the last
// line break of a piece when there is one in its second half.
func split(text string, n int) []string {
	var parts []string
	for text != "" {
		end, units := len(text), 0
		for i, r := range text {
			if units += utf16.RuneLen(r); units > n {
				end = i
				break
			}
		}
		if end < len(text) {
			if nl := strings.LastIndexByte(text[:end], '\n'); nl > end/2 {
				end = nl + 1
			}
		}
		parts, text = append(parts, text[:end]), text[end:]
	}
	return parts
}

// cut is a draft's text as Telegram takes it: its first MaxTextChars, and
// never empty.
func cut(text string) string {
	if parts := split(text, MaxTextChars-1); len(parts) > 1 {
		return parts[0] + "…"
	}
	return cmp.Or(text, "…")
}

// chatOf is the chat ID a binding's key holds: the bridge binds only
// chat IDs (pair, Config.Chat checked at New); 0 is refused by Telegram.
func chatOf(to connector.Conversation) int64 {
	id, _ := strconv.ParseInt(to.Key, 10, 64)
	return id
}
