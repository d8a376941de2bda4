package connector

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
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
