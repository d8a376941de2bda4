package matrixbridge

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// client returns a mautrix client for acc that never retries or sleeps by
// itself: a failure goes straight back to the kit, whose pacing retries in
// order and honours a 429's retry_after_ms.
func (br *Bridge) client(acc Account) *mautrix.Client {
	cli, err := mautrix.NewClient(acc.Homeserver, id.UserID(acc.UserID), acc.AccessToken)
	if err != nil { // only corrupt state: every request then fails, retryable
		cli, _ = mautrix.NewClient("http://invalid.invalid", id.UserID(acc.UserID), acc.AccessToken)
	}
	cli.Client, cli.DeviceID, cli.DefaultHTTPRetries, cli.IgnoreRateLimit = br.http, id.DeviceID(acc.DeviceID), 0, true
	cli.UserAgent = "imv2-matrixbridge/" + Version
	return cli
}

// bound returns the client of the conversation's Account.
func (br *Bridge) bound(to connector.Conversation) (*mautrix.Client, error) {
	acc, err := AccountOf(to.Data)
	if err != nil {
		return nil, err
	}
	return br.client(acc), nil
}

// sendEvent sends one m.room.message with transaction ID txn: the
// homeserver answers a repeat of txn (same access token, within its cache
// window) with the event it already created.
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
// each file as an m.image/m.video/m.audio/m.file event.
func (br *Bridge) Post(ctx context.Context, to connector.Conversation, m *connector.Message) error {
	cli, err := br.bound(to)
	if err == nil && m.Text != "" {
		_, err = sendEvent(ctx, cli, to.Key, "send text", m.IdempotencyKey+"_t", text(m.Text))
	}
	if err != nil {
		return err
	}
	return br.sendFiles(ctx, cli, to.Key, m)
}

// PostDraft implements connector.Editor: the first draft as a new m.text
// event (the kit keeps its handle for a final after a restart).
func (br *Bridge) PostDraft(ctx context.Context, to connector.Conversation, messageID, s string) (string, error) {
	cli, err := br.bound(to)
	if err != nil {
		return "", err
	}
	ev, err := sendEvent(ctx, cli, to.Key, "post draft", imv2.IdempotencyKeyOf(to.ChannelID, messageID)+"_d", text(s))
	return ev.String(), err
}

// Edit implements connector.Editor with an m.replace event.
func (br *Bridge) Edit(ctx context.Context, to connector.Conversation, handle, s string) error {
	cli, err := br.bound(to)
	if err == nil {
		_, err = sendEvent(ctx, cli, to.Key, "edit draft", cli.TxnID(), edit(handle, s))
	}
	return err
}

// Finish implements connector.Finisher: one last edit whose body is exactly
// m.Text (M11) — a redaction of the draft for a final without text — with
// the transaction ID Post gives the text, then the files.
func (br *Bridge) Finish(ctx context.Context, to connector.Conversation, handle string, m *connector.Message) error {
	cli, err := br.bound(to)
	if err != nil {
		return err
	}
	if m.Text != "" {
		_, err = sendEvent(ctx, cli, to.Key, "finish draft", m.IdempotencyKey+"_t", edit(handle, m.Text))
	} else if _, err = cli.RedactEvent(ctx, id.RoomID(to.Key), id.EventID(handle), mautrix.ReqRedact{TxnID: m.IdempotencyKey + "_x"}); err != nil {
		err = classify("redact draft", err)
	}
	if err != nil {
		return err
	}
	return br.sendFiles(ctx, cli, to.Key, m)
}

// Discard implements connector.Discarder: redact a draft whose final never
// came.
func (br *Bridge) Discard(ctx context.Context, to connector.Conversation, handle string) error {
	cli, err := br.bound(to)
	if err != nil {
		return err
	}
	_, err = cli.RedactEvent(ctx, id.RoomID(to.Key), id.EventID(handle))
	return classify("redact draft", err)
}

// Typing implements connector.Typer: thinking and tool show the bot typing
// for TypingTimeout (Matrix has no status line for the tool name), idle
// clears it explicitly, since Dendrite does not push the expiry to /sync.
func (br *Bridge) Typing(ctx context.Context, to connector.Conversation, a imv2.ChatActivity) error {
	cli, err := br.bound(to)
	if err != nil {
		return err
	}
	on, timeout := a.Status != imv2.ActivityIdle, time.Duration(0)
	if on {
		timeout = br.cfg.TypingTimeout
	}
	_, err = cli.UserTyping(ctx, id.RoomID(to.Key), on, timeout)
	return classify("typing", err)
}

// sendFiles uploads each file of m to the media repository and sends its
// event. Uploads are remembered by transaction ID (UploadCache), so a retry
// sends the events again, deduplicated, without a second upload.
func (br *Bridge) sendFiles(ctx context.Context, cli *mautrix.Client, room string, m *connector.Message) error {
	for i, f := range m.Attachments {
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
		if _, err := sendEvent(ctx, cli, room, "send file", txn, c); err != nil {
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
