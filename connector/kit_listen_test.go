package connector_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/state"
)

// reading is a pretend platform that reads its conversations itself: each
// Listen hands one event and waits for its context.
type reading struct {
	*pretend
	started chan state.Binding
	ended   chan struct{}
}

func (r *reading) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	r.started <- b
	err := in.Receive(ctx, connector.InboundEvent{Conversation: b.Key, EventID: "ev-1", Text: "hi from " + b.Key})
	if err != nil {
		return err
	}
	<-ctx.Done()
	r.ended <- struct{}{}
	return nil
}

// TestKit_M9_ListenerRunsWhileTheChannelIsBound: opening a channel starts
// the platform's reader for its binding; what it receives reaches xAgent
// as a user message; Unbind stops it; the goroutines are gone after Close
// (goleak in TestMain).
func TestKit_M9_ListenerRunsWhileTheChannelIsBound(t *testing.T) {
	p := &reading{pretend: newPretend(0), started: make(chan state.Binding, 4), ended: make(chan struct{}, 4)}
	k, url := startKit(t, p, "", connector.Options{})
	got := make(chan imv2.ChatMessage, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: inbound(got)})
	require.NoError(t, err)
	defer cli.Close()
	ch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	b := testwait.Recv(t, p.started, 10*time.Second)
	require.Equal(t, ch, b.Key, "Listen gets the channel's binding")
	m := testwait.Recv(t, got, 10*time.Second)
	require.Equal(t, connector.EventMessageID(ch, "ev-1"), m.MessageID)
	require.Equal(t, "hi from "+ch, m.Text)
	require.NoError(t, k.Unbind(context.Background(), ch))
	testwait.Recv(t, p.ended, 10*time.Second)
}

// inbound is the xAgent side's Target: it passes each user message on.
type inbound chan imv2.ChatMessage

func (in inbound) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	in <- *m
	return nil
}

// TestKit_M9_ListenerEventsReachItsChannelBesideOneNotOpen: another
// channel bound to the reader's conversation is not open here, as one
// xAgent did not reopen since a restart is. The reader's events reach its
// own channel, one after the other, and Receive reports no error: the
// other channel has a reader (and a cursor) of its own once it opens.
// Receive used to fan every event out to both and fail with ErrNoChannel,
// so a Listener returning that error read the first event for ever and
// the open channel got nothing after it.
func TestKit_M9_ListenerEventsReachItsChannelBesideOneNotOpen(t *testing.T) {
	p := &cursorFeed{pretend: newPretend(0), events: 3, errs: make(chan error, 8)}
	k, url := startKit(t, p, "", connector.Options{DefaultConversation: func(string) string { return "room" }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, k.Bind(ctx, state.Binding{ChannelID: "cch_not_open", Key: "room"}))
	got := make(chan imv2.ChatMessage, 4)
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: inbound(got)})
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	for i := range p.events {
		select {
		case m := <-got:
			require.Equal(t, connector.EventMessageID("room", "ev-"+strconv.Itoa(i)), m.MessageID)
		case err := <-p.errs:
			t.Fatalf("event %d: Receive: %v", i, err)
		case <-ctx.Done():
			t.Fatalf("event %d never reached xAgent", i)
		}
	}
}

// cursorFeed is a Listener reading events ev-0 … ev-(events-1) of its
// conversation from the cursor in its binding's Data, as ExampleListener
// does: an event Receive fails is returned (and read again after the
// backoff); one received moves the cursor on.
type cursorFeed struct {
	*pretend
	events int
	errs   chan error
}

func (f *cursorFeed) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	next, _ := strconv.Atoi(string(b.Data))
	for i := next; i < f.events; i++ {
		if err := in.Receive(ctx, connector.InboundEvent{Conversation: b.Key, EventID: "ev-" + strconv.Itoa(i), Text: "hi"}); err != nil {
			f.errs <- err
			return err
		}
		if err := in.Update(ctx, func(b *state.Binding) error { b.Data = []byte(strconv.Itoa(i + 1)); return nil }); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// TestKit_M9_SharedFeedReachesEveryBoundChannel: two channels bound to
// one conversation, and a Listener whose readers take events from one
// shared stream (a websocket or gateway connection, as ExampleListener's
// feed): each event reaches both channels, whichever reader took it.
func TestKit_M9_SharedFeedReachesEveryBoundChannel(t *testing.T) {
	const events = 6
	p := &sharedFeed{pretend: newPretend(0), events: make(chan connector.InboundEvent, events), reading: make(chan struct{}, 4)}
	_, url := startKit(t, p, "", connector.Options{DefaultConversation: func(string) string { return "room" }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan [2]string, 2*events)
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: channelLog(got)})
	require.NoError(t, err)
	defer cli.Close()
	a, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	b, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	testwait.Recv(t, p.reading, 10*time.Second)
	testwait.Recv(t, p.reading, 10*time.Second) // both readers run
	for i := range events {
		p.events <- connector.InboundEvent{Conversation: "room", EventID: "ev-" + strconv.Itoa(i), Text: "hi"}
	}
	seen := map[string]int{}
	for range 2 * events {
		m := testwait.Recv(t, (<-chan [2]string)(got), 10*time.Second)
		seen[m[0]]++
	}
	require.Equal(t, map[string]int{a: events, b: events}, seen)
}

// sharedFeed is a Listener whose readers all take events from one Go
// channel, each event taken by one of them.
type sharedFeed struct {
	*pretend
	events  chan connector.InboundEvent
	reading chan struct{}
}

func (f *sharedFeed) Listen(ctx context.Context, _ state.Binding, in connector.Inbox) error {
	f.reading <- struct{}{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-f.events:
			if err := in.Receive(ctx, ev); err != nil {
				return err
			}
		}
	}
}

// channelLog is the xAgent side's Target: it passes on each user
// message's channel and message_id.
type channelLog chan [2]string

func (l channelLog) PostMessage(_ context.Context, channelID string, m *imv2.ChatMessage) error {
	l <- [2]string{channelID, m.MessageID}
	return nil
}
