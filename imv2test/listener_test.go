package imv2test_test

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/testcard"
	"github.com/xagentkit/imv2/state"
)

// historyChat is a platform whose users' messages sit in a history per
// conversation, read by its Listener from a cursor kept in the binding's
// Data, as a /sync loop or a long poll reads them. People type into it
// (imv2test.Typist). It is no Starter: a new binding has no Data, and
// its Listener reads the conversation from the start — a new binding
// replays the whole history, the bug of a Connector that passed RunKit
// through Receive and failed under imv2sim conform -exec.
type historyChat struct {
	mu   sync.Mutex
	log  map[string][]typed // by conversation key
	wake chan struct{}      // closed and replaced by every Type
}

type typed struct {
	id, text string
	file     *imv2test.UserFile
}

func newHistoryChat() *historyChat {
	return &historyChat{log: map[string][]typed{}, wake: make(chan struct{})}
}

func (*historyChat) Post(context.Context, connector.Conversation, *connector.Message) error {
	return nil
}

func (c *historyChat) Type(_ context.Context, key, text string, file *imv2test.UserFile) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log[key] = append(c.log[key], typed{id: imv2.NewMessageID(), text: text, file: file})
	close(c.wake)
	c.wake = make(chan struct{})
	return nil
}

// Listen hands over every message from the binding's cursor on (from
// the start when it has none), moving the cursor past each.
func (c *historyChat) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	next, _ := strconv.Atoi(string(b.Data))
	for {
		c.mu.Lock()
		msgs, wake := c.log[b.Key], c.wake
		c.mu.Unlock()
		for ; next < len(msgs); next++ {
			m := msgs[next]
			ev := connector.InboundEvent{Conversation: b.Key, EventID: m.id, Text: m.text}
			if f := m.file; f != nil {
				ev.Files = []connector.InboundFile{{Filename: f.Name, Open: func() (io.ReadCloser, error) {
					return io.NopCloser(bytes.NewReader(f.Data)), nil
				}}}
			}
			if err := in.Receive(ctx, ev); err != nil {
				return err
			}
			cursor := []byte(strconv.Itoa(next + 1))
			if err := in.Update(ctx, func(b *state.Binding) error { b.Data = cursor; return nil }); err != nil {
				return err
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil
		}
	}
}

// startingChat is historyChat with the fix: a Starter, so a new binding
// starts at the conversation's present.
type startingChat struct{ *historyChat }

func (c startingChat) Start(_ context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return []byte(strconv.Itoa(len(c.log[key]))), nil
}

// listenOnly reads its conversations but offers the suite no way to type.
type listenOnly struct{ h *historyChat }

func (l listenOnly) Post(ctx context.Context, to connector.Conversation, m *connector.Message) error {
	return l.h.Post(ctx, to, m)
}

func (l listenOnly) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	return l.h.Listen(ctx, b, in)
}

// TestRunKit_K7_K12_UserTypesIntoTheListenersPlatform: with a platform
// that reads its conversations (a connector.Listener), the suite's user
// types into the platform and the messages reach xAgent only through the
// Listener. Every channel of the run is bound to the one default
// conversation, so each new binding meets the history of the checks
// before it: a Listener that starts a new binding at the present (a
// Starter) passes every check; the same Listener without Start replays
// that history into each new channel and fails the user checks; a
// Listener the suite cannot type into has those checks skipped, saying
// why.
func TestRunKit_K7_K12_UserTypesIntoTheListenersPlatform(t *testing.T) {
	t.Parallel()
	// The platform is made in the bubble: its channels must be the bubble's.
	build := func(platform func() connector.Platform) func() (*connector.Connector, error) {
		return func() (*connector.Connector, error) {
			return connector.New(testcard.IM("historychat", "History chat"), platform(), nil)
		}
	}
	t.Run("starts at the present", func(t *testing.T) {
		rep := checkKit(t, build(func() connector.Platform { return startingChat{newHistoryChat()} }), nil)
		require.Empty(t, rep.Failed())
		require.Equal(t, []string{"K1.c", "K2.d", "K6.c", "K12.a", "K12.b", "K12.d", "K12.e"}, rep.Skipped())
	})
	t.Run("replays the history", func(t *testing.T) {
		var rep *imv2test.Report
		checkInBubble(t, build(func() connector.Platform { return newHistoryChat() }), nil, &rep)
		t.Logf("a Listener replaying a new binding's history:\n%s", table(t, rep))
		require.NotEmpty(t, rep.Failed(), "a new binding's history reached xAgent and no check failed")
	})
	t.Run("no typist", func(t *testing.T) {
		var rep *imv2test.Report
		checkInBubble(t, build(func() connector.Platform { return listenOnly{newHistoryChat()} }), nil, &rep)
		require.Empty(t, rep.Failed())
		r, ok := rep.Result("K7.c")
		require.True(t, ok)
		require.Equal(t, imv2test.Skip, r.Status)
		require.Contains(t, r.Reason, "imv2test.Typist")
	})
}
