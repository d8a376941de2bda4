//go:build unix

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/matrix/matrixbridge"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
	"github.com/xagentkit/imv2/xfiles"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// world is a homeserver with a person (alice) in a room and the bot
// account the Connector signs in as.
type world struct {
	hs       *dendrite
	alice    *user
	room     id.RoomID
	botID    string
	botPass  string
	aliceTok string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{hs: startDendrite(t), botPass: "bot-password-1"}
	aliceID, aliceTok := w.hs.createUser("alice", "alice-password-1")
	w.botID, _ = w.hs.createUser("bot", w.botPass)
	w.aliceTok = aliceTok
	w.alice = newUser(t, w.hs.URL, aliceID, aliceTok)
	w.room = w.alice.createRoom()
	return w
}

func (w *world) form() map[string]string {
	return map[string]string{
		matrixbridge.FieldHomeserver: w.hs.URL,
		matrixbridge.FieldUserID:     w.botID,
		matrixbridge.FieldPassword:   w.botPass,
		matrixbridge.FieldRoom:       w.room.String(),
	}
}

// TestPlatform_RealHomeserver drives the Matrix platform side of the
// Bridge alone (no data plane, the kit's calls made by hand) against
// Dendrite: a draft and its edits, the final, a resend deduplicated by
// transaction ID, typing, an outbound file and inbound text and media.
func TestPlatform_RealHomeserver(t *testing.T) {
	w := newWorld(t)
	ctx := ctxFor(t)
	newBridge := func() *matrixbridge.Bridge {
		b, err := matrixbridge.New(matrixbridge.Config{Build: protocol.Build{Version: "test", BuildTime: "2611300000"}, APIKey: "k", PrivateHomeservers: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	p := newBridge()
	form, err := matrixbridge.ParseForm(w.form())
	require.NoError(t, err)
	b, err := p.SignIn(ctx, form)
	require.NoError(t, err)
	require.Equal(t, w.room.String(), b.Key)
	acc, err := matrixbridge.AccountOf(b.Data)
	require.NoError(t, err)
	require.True(t, acc.OwnDevice)
	b.ChannelID = "ch1"
	require.NoError(t, p.Connector().Bind(ctx, b))
	bot := id.UserID(w.botID)
	to := connector.Conversation{ChannelID: "ch1", Key: b.Key, Data: b.Data}
	msg := func(p *matrixbridge.Bridge, m *imv2.ChatMessage) *connector.Message {
		out := &connector.Message{ChatMessage: m, IdempotencyKey: imv2.IdempotencyKeyOf("ch1", m.MessageID)}
		for _, f := range m.Files {
			rc, info, err := p.Connector().Handler().OpenFile(ctx, "ch1", f.FileRef)
			require.NoError(t, err)
			defer rc.Close()
			data, err := io.ReadAll(rc)
			require.NoError(t, err)
			out.Attachments = append(out.Attachments, connector.OutboundFile{File: f, Info: info, Reader: bytes.NewReader(data)})
		}
		return out
	}

	// C5: thinking shows typing; D8: drafts post then edit; M11: the final
	// replaces the body; C6: idle clears typing.
	require.NoError(t, p.Typing(ctx, to, imv2.ChatActivity{Status: imv2.ActivityThinking}))
	w.alice.waitFor("typing shown", func() bool { return typingHas(w.alice.typing, bot) })
	h, err := p.PostDraft(ctx, to, "r1", "The")
	require.NoError(t, err)
	for _, s := range []string{"The answer", "The answer is"} {
		require.NoError(t, p.Edit(ctx, to, h, s))
	}
	final := &imv2.ChatMessage{MessageID: "r1", Text: "The answer is 42."}
	require.NoError(t, p.Finish(ctx, to, h, msg(p, final)))
	require.NoError(t, p.Typing(ctx, to, imv2.ChatActivity{Status: imv2.ActivityIdle}))
	w.alice.waitFor("final edit", func() bool { return lastShown(w.alice.messagesFrom(bot)) == final.Text })
	w.alice.waitFor("typing cleared", func() bool { return typingCleared(w.alice.typing, bot) })
	originals, edits := split(w.alice.messagesFrom(bot))
	require.Len(t, originals, 1, "one event for the streamed reply")
	require.NotEmpty(t, edits)
	for _, e := range edits {
		target, _ := isEdit(e)
		require.Equal(t, originals[0].ID, target)
	}

	// A resend of the same final on a fresh Bridge (a restart that lost
	// the completed record) is deduplicated by the homeserver.
	p2 := newBridge()
	require.NoError(t, p2.Connector().Bind(ctx, b))
	before := len(w.alice.messagesFrom(bot))
	require.NoError(t, p2.Post(ctx, to, msg(p2, &imv2.ChatMessage{MessageID: "r9", Text: "only once"})))
	require.NoError(t, p2.Post(ctx, to, msg(p2, &imv2.ChatMessage{MessageID: "r9", Text: "only once"})))
	w.alice.say("marker-1")
	w.alice.waitFor("marker", func() bool { return lastBody(w.alice.timeline) == "marker-1" })
	require.Len(t, w.alice.messagesFrom(bot), before+1, "same transaction ID: one event")

	// M7, M12: an outbound file arrives as m.file with the same bytes.
	data := make([]byte, 70_000)
	_, _ = rand.Read(data)
	files := p2.Connector().Handler()
	f, err := files.OfferFile(ctx, "ch1", "report.bin", "application/octet-stream", bytes.NewReader(data))
	require.NoError(t, err)
	require.NoError(t, p2.Post(ctx, to, msg(p2, &imv2.ChatMessage{MessageID: "r10", Text: "see file", Files: []imv2.File{{Type: imv2.FileFile, FileRef: f.FileRef}}})))
	w.alice.waitFor("file event", func() bool { return lastMsgType(w.alice.timeline) == event.MsgFile })
	fe := w.alice.timeline[len(w.alice.timeline)-1].Content.AsMessage()
	require.Equal(t, "report.bin", fe.Body)
	got := download(t, w.alice.cli, fe.URL)
	require.True(t, bytes.Equal(data, got), "file bytes differ")

	// Inbound: every message alice wrote since the sign-in (marker-1
	// included) is received once, with the room and its event ID; the
	// image comes with its bytes.
	srv := httptest.NewServer(files)
	defer srv.Close()
	got2 := map[string]connector.InboundEvent{}
	var mu sync.Mutex
	arrived := make(chan string, 8)
	syncCtx, stopSync := context.WithCancel(context.Background())
	syncDone := make(chan error, 1)
	go func() {
		syncDone <- p2.Listen(syncCtx, b, inbox(func(_ context.Context, ev connector.InboundEvent) error {
			mu.Lock()
			_, dup := got2[ev.EventID]
			got2[ev.EventID] = ev
			mu.Unlock()
			if dup {
				t.Errorf("event %s received twice", ev.EventID)
			}
			require.Equal(t, w.room.String(), ev.Conversation)
			arrived <- ev.EventID
			return nil
		}))
	}()
	defer func() { stopSync(); <-syncDone }()
	evID := w.alice.say("hello bot")
	img := make([]byte, 5000)
	_, _ = rand.Read(img)
	up, err := w.alice.cli.UploadBytesWithName(ctx, img, "image/png", "cat.png")
	require.NoError(t, err)
	imgEv, err := w.alice.cli.SendMessageEvent(ctx, w.room, event.EventMessage, &event.MessageEventContent{
		MsgType: event.MsgImage, Body: "cat.png", URL: up.ContentURI.CUString(), Info: &event.FileInfo{MimeType: "image/png", Size: len(img)},
	})
	require.NoError(t, err)
	want := imgEv.EventID.String()
	for id := ""; id != want; {
		select {
		case id = <-arrived:
		case <-ctx.Done():
			t.Fatal("the image did not arrive")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got2, 3, "marker-1, hello bot, the image")
	require.Equal(t, "hello bot", got2[evID.String()].Text)
	im := got2[want]
	require.Len(t, im.Files, 1)
	require.Equal(t, "cat.png", im.Files[0].Filename)
	rc, err := im.Files[0].Open()
	require.NoError(t, err)
	defer rc.Close()
	offered, err := files.OfferFile(ctx, "ch1", im.Files[0].Filename, im.Files[0].MimeType, rc) // what the kit does
	require.NoError(t, err)
	require.Equal(t, imv2.FileImage, offered.Type)
	fetched, err := xfiles.Fetch(ctx, srv.Client(), srv.URL, offered, 1<<20)
	require.NoError(t, err)
	require.True(t, bytes.Equal(img, fetched))
}

// inbox is the kit's side of a Listener, by hand: events go to the
// function, binding updates (the /sync position) are dropped.
type inbox func(context.Context, connector.InboundEvent) error

func (in inbox) Receive(ctx context.Context, ev connector.InboundEvent) error { return in(ctx, ev) }

func (inbox) Update(context.Context, func(*state.Binding) error) error { return nil }

func typingHas(snaps [][]id.UserID, u id.UserID) bool {
	for _, s := range snaps {
		for _, x := range s {
			if x == u {
				return true
			}
		}
	}
	return false
}

// typingCleared: u was shown typing, and a later snapshot no longer has u.
func typingCleared(snaps [][]id.UserID, u id.UserID) bool {
	seen := false
	for _, s := range snaps {
		has := false
		for _, x := range s {
			has = has || x == u
		}
		if has {
			seen = true
		} else if seen {
			return true
		}
	}
	return false
}

func split(evs []*event.Event) (originals, edits []*event.Event) {
	for _, e := range evs {
		if _, ok := isEdit(e); ok {
			edits = append(edits, e)
		} else {
			originals = append(originals, e)
		}
	}
	return originals, edits
}

func lastShown(evs []*event.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return shownBody(evs[len(evs)-1])
}

func lastBody(evs []*event.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Content.AsMessage().Body
}

func lastMsgType(evs []*event.Event) event.MessageType {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Content.AsMessage().MsgType
}

func download(t *testing.T, cli *mautrix.Client, u id.ContentURIString) []byte {
	t.Helper()
	mxc, err := u.Parse()
	require.NoError(t, err)
	data, err := cli.DownloadBytes(ctxFor(t), mxc)
	require.NoError(t, err)
	return data
}
