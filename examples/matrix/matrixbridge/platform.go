package matrixbridge

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// client returns a mautrix client for b that never retries or sleeps by
// itself: a failure goes straight back to the kit, whose pacing retries in
// order and honours a 429's retry_after_ms.
func (br *Bridge) client(b Binding) *mautrix.Client {
	cli, err := mautrix.NewClient(b.Homeserver, id.UserID(b.UserID), b.AccessToken)
	if err != nil { // only a corrupt state file: every request then fails, retryable
		cli, _ = mautrix.NewClient("http://invalid.invalid", id.UserID(b.UserID), b.AccessToken)
	}
	cli.Client, cli.DeviceID, cli.DefaultHTTPRetries, cli.IgnoreRateLimit = br.http, id.DeviceID(b.DeviceID), 0, true
	cli.UserAgent = "imv2-matrixbridge/" + Version
	return cli
}

// bound returns the channel's sign-in and its client.
func (br *Bridge) bound(channelID string) (Binding, *mautrix.Client, error) {
	b, ok := br.store.Get(channelID)
	if !ok {
		e := imv2.Errorf(protocol.CodeConnectionNotAuthenticated, "matrixbridge: channel is not bound to a Matrix room")
		return Binding{}, nil, imv2.Permanent(e)
	}
	return b, br.client(b), nil
}

// send sends one m.room.message with transaction ID txn: the homeserver
// answers a repeat of txn (same access token, within its cache window)
// with the event it already created.
func sendEvent(ctx context.Context, cli *mautrix.Client, room, op, txn string, c *event.MessageEventContent) (id.EventID, error) {
	resp, err := cli.SendMessageEvent(ctx, id.RoomID(room), event.EventMessage, c, mautrix.ReqSendEvent{TransactionID: txn})
	if err != nil {
		return "", classify(op, err)
	}
	return resp.EventID, nil
}

func text(s string) *event.MessageEventContent {
	return &event.MessageEventContent{MsgType: event.MsgText, Body: s}
}

// edit replaces the body of target with s (m.replace); the fallback body
// is the "* " a client without edits shows.
func edit(target, s string) *event.MessageEventContent {
	return &event.MessageEventContent{MsgType: event.MsgText, Body: "* " + s, NewContent: text(s),
		RelatesTo: (&event.RelatesTo{}).SetReplace(id.EventID(target))}
}

// PostsIdempotently implements connector.IdempotentPlatform: every event
// of a final is sent with a transaction ID derived from
// Message.IdempotencyKey.
func (br *Bridge) PostsIdempotently() bool { return true }

// Post implements connector.Platform: the text as one m.text event, then
// each file as an m.image/m.video/m.audio/m.file event. A draft of m
// posted before a restart (its handle is stored) is finished instead.
func (br *Bridge) Post(ctx context.Context, to connector.Conversation, m *connector.Message) error {
	b, cli, err := br.bound(to.ChannelID)
	if err != nil {
		return err
	}
	if h, ok := b.Drafts[m.MessageID]; ok {
		return br.finish(ctx, b, cli, h, m)
	}
	if m.Text != "" {
		if _, err := sendEvent(ctx, cli, b.RoomID, "send text", m.IdempotencyKey+"_t", text(m.Text)); err != nil {
			return err
		}
	}
	return br.sendFiles(ctx, b, cli, m)
}

// PostDraft implements connector.Editor: the first draft as a new m.text
// event, whose handle is stored for a final after a restart.
func (br *Bridge) PostDraft(ctx context.Context, to connector.Conversation, messageID, s string) (string, error) {
	b, cli, err := br.bound(to.ChannelID)
	if err != nil {
		return "", err
	}
	ev, err := sendEvent(ctx, cli, b.RoomID, "post draft", imv2.IdempotencyKeyOf(to.ChannelID, messageID)+"_d", text(s))
	if err == nil {
		_ = br.store.update(to.ChannelID, func(b *Binding) bool { b.addDraft(messageID, ev.String()); return true })
	}
	return ev.String(), err
}

// Edit implements connector.Editor with an m.replace event.
func (br *Bridge) Edit(ctx context.Context, to connector.Conversation, handle, s string) error {
	b, cli, err := br.bound(to.ChannelID)
	if err == nil {
		_, err = sendEvent(ctx, cli, b.RoomID, "edit draft", cli.TxnID(), edit(handle, s))
	}
	return err
}

// Finish implements connector.Finisher: one last edit whose body is exactly
// m.Text (M11) — a redaction of the draft for a final without text — with
// the transaction ID Post gives the text, then the files.
func (br *Bridge) Finish(ctx context.Context, to connector.Conversation, handle string, m *connector.Message) error {
	b, cli, err := br.bound(to.ChannelID)
	if err != nil {
		return err
	}
	return br.finish(ctx, b, cli, handle, m)
}

func (br *Bridge) finish(ctx context.Context, b Binding, cli *mautrix.Client, handle string, m *connector.Message) error {
	if m.Text != "" {
		if _, err := sendEvent(ctx, cli, b.RoomID, "finish draft", m.IdempotencyKey+"_t", edit(handle, m.Text)); err != nil {
			return err
		}
	} else if _, err := cli.RedactEvent(ctx, id.RoomID(b.RoomID), id.EventID(handle), mautrix.ReqRedact{TxnID: m.IdempotencyKey + "_x"}); err != nil {
		return classify("redact draft", err)
	}
	if err := br.sendFiles(ctx, b, cli, m); err != nil {
		return err
	}
	return br.store.update(b.ChannelID, func(b *Binding) bool { return b.dropDraft(m.MessageID) })
}

// Discard implements connector.Discarder: redact a draft whose final never
// came.
func (br *Bridge) Discard(ctx context.Context, to connector.Conversation, handle string) error {
	b, cli, err := br.bound(to.ChannelID)
	if err != nil {
		return err
	}
	if _, err := cli.RedactEvent(ctx, id.RoomID(b.RoomID), id.EventID(handle)); err != nil {
		return classify("redact draft", err)
	}
	return br.store.update(b.ChannelID, func(b *Binding) bool {
		for mid, h := range b.Drafts {
			if h == handle {
				return b.dropDraft(mid)
			}
		}
		return false
	})
}

// Typing implements connector.Typer: thinking and tool show the bot typing
// for TypingTimeout (Matrix has no status line for the tool name), idle
// clears it explicitly, since Dendrite does not push the expiry to /sync.
func (br *Bridge) Typing(ctx context.Context, to connector.Conversation, a imv2.ChatActivity) error {
	b, cli, err := br.bound(to.ChannelID)
	if err != nil {
		return err
	}
	on, timeout := a.Status != imv2.ActivityIdle, time.Duration(0)
	if on {
		timeout = br.cfg.TypingTimeout
	}
	_, err = cli.UserTyping(ctx, id.RoomID(b.RoomID), on, timeout)
	return classify("typing", err)
}

// sendFiles uploads each file of m to the media repository and sends its
// event. Uploads are remembered by transaction ID (UploadCache), so a retry
// sends the events again, deduplicated, without a second upload.
func (br *Bridge) sendFiles(ctx context.Context, b Binding, cli *mautrix.Client, m *connector.Message) error {
	for i, f := range m.Files {
		txn := m.IdempotencyKey + "_f" + strconv.Itoa(i)
		name, mime := cmp.Or(f.Info.Filename, f.Filename, "file"), cmp.Or(f.Info.MimeType, "application/octet-stream")
		mxc, ok := br.uploads.Get(txn)
		if !ok {
			resp, err := cli.UploadMedia(ctx, mautrix.ReqUploadMedia{Content: f.Reader, ContentLength: f.Info.ByteSize, ContentType: mime, FileName: name})
			if err != nil {
				return classify("upload media", err)
			}
			mxc = resp.ContentURI
			br.uploads.Add(txn, mxc)
		}
		c := &event.MessageEventContent{MsgType: msgTypes[f.Type], Body: name, FileName: name, URL: mxc.CUString(),
			Info: &event.FileInfo{MimeType: mime, Size: int(f.Info.ByteSize)}}
		if c.MsgType == "" {
			c.MsgType = event.MsgFile
		}
		if _, err := sendEvent(ctx, cli, b.RoomID, "send file", txn, c); err != nil {
			return err
		}
	}
	return nil
}

// msgTypes maps files[].type (M4) to the Matrix msgtype; anything else is
// m.file.
var msgTypes = map[imv2.FileType]event.MessageType{
	imv2.FileImage: event.MsgImage, imv2.FileVideo: event.MsgVideo, imv2.FileAudio: event.MsgAudio, imv2.FileFile: event.MsgFile,
}
