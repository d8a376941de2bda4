package connector

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/state"
)

// TestKit_C7_NegativeTypingRefreshNeverRepeats: Display.TypingRefresh < 0
// shows typing once and clears it at the activity timeout, never sending
// the same state again (XEP-0085 forbids repeating a chat state).
func TestKit_C7_NegativeTypingRefreshNeverRepeats(t *testing.T) {
	e := &editor{}
	k, clock := newUnit(t, e, false, Options{Advanced: Advanced{
		Display: Display{TypingRefresh: -1},
		Channel: &imv2.Options{ActivityTimeout: 30 * time.Second},
	}})
	if err := k.display.SetActivity(context.Background(), "ch_1", imv2.ChatActivity{Status: imv2.ActivityThinking}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		clock.Advance(5 * time.Second)
	}
	want := []string{"typing thinking ", "typing idle "}
	if got := e.got(); !slices.Equal(got, want) {
		t.Fatalf("Typer calls %q; want %q", got, want)
	}
}

// poster is a Platform with Post alone: no drafts, no typing (a field,
// not an embedded editor, whose methods would be promoted).
type poster struct{ log editor }

func (p *poster) Post(ctx context.Context, to Conversation, m *Message) error {
	return p.log.Post(ctx, to, m)
}

// TestKit_C5_PlatformWithoutTyperIgnoresActivity: on a platform without
// Typer, activity through the Channel's Target is a no-op and no error
// (C5), and the final is posted alone.
func TestKit_C5_PlatformWithoutTyperIgnoresActivity(t *testing.T) {
	p := &poster{}
	k, clock := newUnit(t, p, false, Options{})
	ctx := context.Background()
	tg := drainTarget{k.display, k}
	for _, a := range []imv2.ChatActivity{{Status: imv2.ActivityThinking}, {Status: imv2.ActivityTool, ToolName: "calc"}, {Status: imv2.ActivityIdle}} {
		if err := tg.SetActivity(ctx, "ch_1", a); err != nil {
			t.Fatalf("SetActivity(%s) = %v; want nil", a.Status, err)
		}
		clock.Advance(5 * time.Second) // past a typing refresh
	}
	if err := tg.PostMessage(ctx, "ch_1", &imv2.ChatMessage{MessageID: "m1", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if got, want := p.log.got(), []string{"post default x files=0"}; !slices.Equal(got, want) {
		t.Fatalf("platform calls %q; want %q", got, want)
	}
}

// TestKit_MaxFileBytesIsTheInboundLimit: MaxFileBytes is exactly the
// largest file OfferFile takes; one byte more is refused.
func TestKit_MaxFileBytesIsTheInboundLimit(t *testing.T) {
	k, _ := newUnit(t, &editor{}, false, Options{})
	ctx := context.Background()
	n := k.MaxFileBytes()
	if _, err := k.OfferFile(ctx, "ch_1", "a.bin", "", io.LimitReader(zeros{}, n)); err != nil {
		t.Fatalf("a file of MaxFileBytes (%d) refused: %v", n, err)
	}
	if _, err := k.OfferFile(ctx, "ch_1", "b.bin", "", io.LimitReader(zeros{}, n+1)); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("a file of MaxFileBytes+1: %v; want ErrFileTooLarge", err)
	}
}

// zeros reads zero bytes for ever.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// blockingListener is an editor whose Listen reports its start and reads
// until its context ends.
type blockingListener struct {
	editor
	started chan string
}

func (l *blockingListener) Listen(ctx context.Context, b state.Binding, _ Inbox) error {
	l.started <- b.ChannelID
	<-ctx.Done()
	return ctx.Err()
}

// TestKit_W6_ListeningFollowsTheReader: Listening is true once the
// channel's reader runs and false for a channel never opened and after
// the channel closed.
func TestKit_W6_ListeningFollowsTheReader(t *testing.T) {
	l := &blockingListener{started: make(chan string, 1)}
	k, _ := newUnit(t, l, false, Options{})
	if k.Listening("ch_1") {
		t.Fatal("Listening before the channel opened")
	}
	k.listen("ch_1") // as channel.open does
	if got := <-l.started; got != "ch_1" {
		t.Fatalf("Listen of %q; want ch_1", got)
	}
	if !k.Listening("ch_1") || k.Listening("ch_2") {
		t.Fatalf("Listening ch_1 %v, ch_2 %v; want true, false", k.Listening("ch_1"), k.Listening("ch_2"))
	}
	k.channelClosed("ch_1")
	if k.Listening("ch_1") {
		t.Fatal("Listening after the channel closed")
	}
}
