package connector_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/testwait"
)

// editOnly is an Editor that can neither delete (no Discarder) nor
// finish other than by an edit (no Finisher).
type editOnly chan string

func (p editOnly) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p <- "post " + m.Text
	return nil
}

func (p editOnly) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	p <- "draft " + text
	return "ev-" + messageID, nil
}

func (p editOnly) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	p <- "edit " + handle + " " + text
	return nil
}

// streamOnly is a Drafter without a Discarder.
type streamOnly chan string

func (p streamOnly) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p <- "post " + m.Text
	return nil
}

func (p streamOnly) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	p <- "draft " + d.Text
	return "st-" + d.MessageID, nil
}

func (p streamOnly) Finish(_ context.Context, _ connector.Conversation, handle string, m *connector.Message) error {
	p <- "finish " + handle + " " + m.Text
	return nil
}

// TestKit_M11_AgedDraftIsFinishedInPlace: a draft idle past DraftTTL on a
// platform that cannot delete it stays on screen, so its late final
// finishes that message (an edit, or the Drafter's Finish) instead of
// posting a second one beside it: never both the assembled text and the
// final (profile §5).
func TestKit_M11_AgedDraftIsFinishedInPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode connector.Mode
		last string // the final's platform call, before the message ID
	}{
		{name: "edit", mode: connector.ModeEdit, last: "edit ev-"},
		{name: "stream", mode: connector.ModeStream, last: "finish st-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := make(chan string, 64)
			var p connector.Platform = editOnly(calls)
			if tc.mode == connector.ModeStream {
				p = streamOnly(calls)
			}
			next := func() string { return testwait.Recv(t, (<-chan string)(calls), 20*time.Second) }
			clk := fakeclock.New(time.Now()) // the agent stamps deltas with the wall clock
			_, url := startKit(t, p, "", connector.Options{
				Mode: tc.mode,
				Advanced: connector.Advanced{
					Clock:   clk,
					Display: connector.Display{DraftTTL: time.Minute},
					Channel: &imv2.Options{DeltaIdleTTL: time.Hour, DeltaSweep: time.Minute},
				},
			})
			a := newAgent()
			xc, ch := a.dial(t, url)
			ctx := context.Background()
			r := newReply(t, xc, ch)
			require.NoError(t, r.Delta(ctx, "Hel"))
			require.Equal(t, "draft Hel", next())
			clk.Advance(2 * time.Minute) // the draft ages out; its message stays shown
			require.NoError(t, final(ctx, r, imv2.ChatMessage{Text: "Hello!"}))
			o := a.next(t)
			require.Nil(t, o.err)
			require.Equal(t, imv2.AckAccepted, o.status)
			require.Equal(t, tc.last+r.MessageID()+" Hello!", next(), "the final finishes the aged draft in place")
			select {
			case extra := <-calls:
				t.Fatalf("a further platform call: %q", extra)
			default:
			}
		})
	}
}
