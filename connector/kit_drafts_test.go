package connector_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/state"
)

// finisher is an Editor and Finisher that reports every call.
type finisher chan string

func (f finisher) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	f <- "post " + m.Text
	return nil
}

func (f finisher) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	f <- "draft " + text
	return "ev-" + messageID, nil
}

func (f finisher) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	f <- "edit " + handle + " " + text
	return nil
}

func (f finisher) Finish(_ context.Context, _ connector.Conversation, handle string, m *connector.Message) error {
	f <- "finish " + handle + " " + m.Text
	return nil
}

// bindCounter counts the binding writes: Binds and Updates.
type bindCounter struct {
	*boltstore.Store
	binds atomic.Int32
}

func (s *bindCounter) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	s.binds.Add(1)
	return s.Store.Bind(ctx, b)
}

func (s *bindCounter) Update(ctx context.Context, channelID string, f func(*state.Binding) error) (state.Binding, bool, error) {
	s.binds.Add(1)
	return s.Store.Update(ctx, channelID, f)
}

// TestKit_M11_DraftHandleSurvivesRestart: the handle of a streamed
// reply's draft is written to the binding once (not per delta); after a
// restart on the same boltstore file, when the display has forgotten the
// draft, the final finishes that draft instead of posting a second
// message, and the record goes.
func TestKit_M11_DraftHandleSurvivesRestart(t *testing.T) {
	calls := make(finisher, 64)
	next := func() string { return testwait.Recv(t, (<-chan string)(calls), 20*time.Second) }
	var st *bindCounter // the store of the Connector running now
	rk := startRestartable(t, func(bolt *boltstore.Store) (*connector.Connector, error) {
		st = &bindCounter{Store: bolt}
		return connector.New(kitCard(""), calls, &connector.Options{
			Store: st, Mode: connector.ModeEdit, Advanced: connector.Advanced{Display: connector.Display{Interval: 10 * time.Millisecond}},
			DefaultConversation: func(string) string { return "room-1" },
		})
	})
	a := newAgent()
	xc, ch := a.dial(t, rk.URL())
	ctx := context.Background()
	_, _, err := st.Binding(ctx, ch) // the default binding exists once the channel is open
	require.NoError(t, err)
	before := st.binds.Load()
	r := newReply(t, xc, ch)
	require.NoError(t, r.Delta(ctx, "Hel"))
	require.Equal(t, "draft Hel", next())
	require.NoError(t, r.Delta(ctx, "lo"))
	require.Equal(t, "edit ev-"+r.MessageID()+" Hello", next())
	require.NoError(t, r.Delta(ctx, " there"))
	require.Equal(t, "edit ev-"+r.MessageID()+" Hello there", next())
	require.Equal(t, int32(1), st.binds.Load()-before, "one binding write for the message, not one per delta")
	b, ok, err := st.Binding(ctx, ch)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []state.DraftHandle{{MessageID: r.MessageID(), Handle: "ev-" + r.MessageID()}}, b.Drafts)
	rk.stop()

	rk.restart()
	defer rk.stop()
	a.reopened(t, ch, 1)
	require.NoError(t, final(ctx, r, imv2.ChatMessage{Text: "Hello there!"}))
	o := a.next(t)
	require.Nil(t, o.err)
	require.Equal(t, imv2.AckAccepted, o.status)
	require.Equal(t, "finish ev-"+r.MessageID()+" Hello there!", next(), "the final finishes the draft shown before the restart")
	b, _, err = st.Binding(ctx, ch)
	require.NoError(t, err)
	require.Empty(t, b.Drafts, "the record goes with the final")
	select {
	case extra := <-calls:
		t.Fatalf("a further platform call: %q", extra)
	default:
	}
}

// lostDraft is an Editor whose first PostDraft shows the temporary message
// and then loses the response (a plain error: it may have been applied).
type lostDraft struct {
	calls chan string
	lost  atomic.Bool
}

func (p *lostDraft) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.calls <- "post " + m.Text
	return nil
}

func (p *lostDraft) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	p.calls <- "draft " + text
	if p.lost.CompareAndSwap(false, true) {
		return "", errors.New("read tcp: connection reset by peer")
	}
	return "ev-" + messageID, nil
}

func (p *lostDraft) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	p.calls <- "edit " + handle + " " + text
	return nil
}

// lostStream is a Drafter whose first Draft call creates the drafted
// message and then loses its response.
type lostStream struct {
	calls chan string
	lost  atomic.Bool
}

func (p *lostStream) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.calls <- "post " + m.Text
	return nil
}

func (p *lostStream) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	p.calls <- "draft " + d.Text
	if p.lost.CompareAndSwap(false, true) {
		return "", errors.New("read tcp: connection reset by peer")
	}
	return "st-" + d.MessageID, nil
}

func (p *lostStream) Finish(_ context.Context, _ connector.Conversation, handle string, m *connector.Message) error {
	p.calls <- "finish " + handle + " " + m.Text
	return nil
}

// TestKit_D8_M11_LostFirstDraftIsNotMadeAgain: an Editor's PostDraft, or
// a Drafter's first Draft, whose outcome is unknown is not made again —
// neither by the kit's retry nor by the next draft or coalesced edit — so
// no second temporary message appears; the message shows no more drafts
// and its final is posted whole with Post. The next message gets its
// draft as usual.
func TestKit_D8_M11_LostFirstDraftIsNotMadeAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts connector.Options
		last string // the final of the second message, after its handle
	}{
		{name: "edit PostDraft", opts: connector.Options{Mode: connector.ModeEdit, Advanced: connector.Advanced{Display: connector.Display{Interval: time.Millisecond}}}, last: "edit ev-"},
		{name: "stream Draft", opts: connector.Options{Mode: connector.ModeStream}, last: "finish st-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := make(chan string, 64)
			var p connector.Platform = &lostDraft{calls: calls}
			if tc.opts.Mode == connector.ModeStream {
				p = &lostStream{calls: calls}
			}
			next := func() string { return testwait.Recv(t, (<-chan string)(calls), 20*time.Second) }
			tc.opts.Pace = connector.Pace{Backoff: time.Millisecond}
			_, url := startKit(t, p, "", tc.opts)
			a := newAgent()
			xc, ch := a.dial(t, url)
			ctx := context.Background()
			r := newReply(t, xc, ch)
			require.NoError(t, r.Delta(ctx, "Hel"))
			require.Equal(t, "draft Hel", next())
			require.NoError(t, r.Delta(ctx, "lo"))
			require.NoError(t, r.Delta(ctx, " there"))
			require.NoError(t, final(ctx, r, imv2.ChatMessage{Text: "Hello there!"}))
			o := a.next(t)
			require.Nil(t, o.err)
			require.Equal(t, imv2.AckAccepted, o.status)
			require.Equal(t, "post Hello there!", next(), "the final posted whole, after no second temporary message")

			r = newReply(t, xc, ch)
			require.NoError(t, r.Delta(ctx, "Next"))
			require.Equal(t, "draft Next", next())
			require.NoError(t, final(ctx, r, imv2.ChatMessage{Text: "Next one"}))
			require.Nil(t, a.next(t).err)
			require.Equal(t, tc.last+r.MessageID()+" Next one", next())
			select {
			case extra := <-calls:
				t.Fatalf("a further platform call: %q", extra)
			default:
			}
		})
	}
}
