package connector_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
)

// agent is the xAgent side: it counts the user messages that reach it and
// the channels every connect reopened, and reports the terminal outcome of
// every final it sent.
type agent struct {
	users   *seen // message_id → times the agent got it
	opened  *seen // channel ID → connects (Dial's first, every reconnect) that reopened it
	outcome chan outcome
}

type outcome struct {
	id     string
	status imv2.AckStatus
	err    *imv2.Error
}

func newAgent() *agent {
	return &agent{users: newSeen(), opened: newSeen(), outcome: make(chan outcome, 256)}
}

func (a *agent) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	a.users.add(m.MessageID)
	return nil
}

func (a *agent) count(id string) int { return a.users.count(id) }

// reopened waits until a connect (after a Connector restart) reopened the
// channel n times: both sides then hold it open.
func (a *agent) reopened(t *testing.T, channelID string, n int) { a.opened.wait(t, channelID, n) }

func (a *agent) dial(t *testing.T, url string) (*dataplane.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: url, Target: a,

		OnConnected: func(_ string, ids []string) {
			for _, id := range ids {
				a.opened.add(id)
			}
		},
		Options: &imv2.Options{
			OnDelivered: func(_ string, m imv2.ChatMessage, s imv2.AckStatus) { a.outcome <- outcome{id: m.MessageID, status: s} },
			OnFailed:    func(_ string, m imv2.ChatMessage, err *imv2.Error) { a.outcome <- outcome{id: m.MessageID, err: err} },
		},
		Advanced: dataplane.ClientAdvanced{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ch, err := c.OpenChannel(ctx, "")
	require.NoError(t, err)
	return c, ch
}

func (a *agent) next(t *testing.T) outcome {
	t.Helper()
	select {
	case o := <-a.outcome:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("no ack within 30 s")
		return outcome{}
	}
}

// TestKit_A8_M9_FiftyFinalsInOrderUnderRateLimit: 50 finals sent at once on
// one channel to a platform that rate-limits every 5th call are all
// accepted and shown in the order they were sent: a rate-limited final is
// retried by the kit while the later ones wait.
func TestKit_A8_M9_FiftyFinalsInOrderUnderRateLimit(t *testing.T) {
	t.Parallel()
	p := newPretend(5)
	_, url := startKit(t, p, "", connector.Options{})
	a := newAgent()
	xc, ch := a.dial(t, url)
	var sent []string
	for i := range 50 {
		id, err := sendFinal(context.Background(), xc, ch, imv2.ChatMessage{Text: fmt.Sprintf("final %d", i)})
		require.NoError(t, err)
		sent = append(sent, id)
	}
	for range 50 {
		o := a.next(t)
		require.Nil(t, o.err, "final %s rejected", o.id)
		require.Equal(t, imv2.AckAccepted, o.status)
	}
	require.Equal(t, sent, p.finals(ch), "finals shown in the order sent")
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, 50+p.limited, p.calls, "each rate-limited call was made once more")
	require.GreaterOrEqual(t, p.limited, 10, "every 5th call was rate-limited")
}

// TestKit_M7_M12_UnknownOrForeignFileRefRejectedWithoutPlatformCall: a
// final naming a file_ref never uploaded, or one uploaded to another
// channel, is rejected invalid_packet, retryable=false, and the platform is
// not called; one naming its own channel's upload is posted with the file
// opened.
func TestKit_M7_M12_UnknownOrForeignFileRefRejectedWithoutPlatformCall(t *testing.T) {
	t.Parallel()
	p := newPretend(0)
	k, url := startKit(t, p, "", connector.Options{})
	a := newAgent()
	c, ch := a.dial(t, url)
	other, err := c.OpenChannel(context.Background(), "")
	require.NoError(t, err)
	put := func(channelID string) string {
		info, err := k.Handler().Files().Put(context.Background(), channelID, "a.txt", "text/plain", strings.NewReader("hello"))
		require.NoError(t, err)
		return info.FileRef
	}
	foreign, own := put(other), put(ch)
	for _, ref := range []string{"file_0123456789abcdef0123456789abcdef", foreign} {
		_, err := c.Send(context.Background(), ch, imv2.ChatMessage{Text: "see file", Files: []imv2.File{{Type: imv2.FileFile, FileRef: ref, Filename: "a.txt"}}})
		require.NoError(t, err)
		o := a.next(t)
		require.NotNil(t, o.err, "a final naming %s was accepted", ref)
		require.Equal(t, imv2.CodeInvalidPacket, o.err.Code)
		require.False(t, o.err.Retryable)
	}
	p.mu.Lock()
	require.Zero(t, p.calls, "the platform was called for a final whose file it cannot have")
	p.mu.Unlock()

	id, err := sendFinal(context.Background(), c, ch, imv2.ChatMessage{Text: "see file", Files: []imv2.File{{Type: imv2.FileFile, FileRef: own, Filename: "a.txt"}}})
	require.NoError(t, err)
	o := a.next(t)
	require.Nil(t, o.err)
	require.Equal(t, []string{id}, p.finals(ch))
}

// TestKit_M9_S8_ReplayedEventIsNoSecondMessageAcrossRestart: an inbound
// platform event received twice reaches the agent once — in the same
// process, and after the Connector restarted on the same boltstore file,
// where the channel keeps its ID (W5) and its binding.
func TestKit_M9_S8_ReplayedEventIsNoSecondMessageAcrossRestart(t *testing.T) {
	t.Parallel()
	acked := newSeen()
	r := startRestartable(t, func(st *boltstore.Store) (*connector.Connector, error) {
		return connector.New(kitCard(""), newPretend(0), &connector.Options{
			Store: st, DefaultConversation: func(string) string { return "room-1" },
			Advanced: connector.Advanced{Channel: &imv2.Options{OnDelivered: acked.delivered}},
		})
	})
	a := newAgent()
	_, ch := a.dial(t, r.URL())
	ev := connector.InboundEvent{Conversation: "room-1", EventID: "update-4711", Text: "hello"}
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	require.NoError(t, r.K.Receive(context.Background(), ev))
	a.users.wait(t, id, 1)
	require.NoError(t, r.K.Receive(context.Background(), ev), "a replay")
	acked.wait(t, id, 1)
	require.True(t, pendingEmpty(t, r.Bolt, ch))
	r.stop()

	r.restart()
	defer r.stop()
	a.reopened(t, ch, 1)
	require.NoError(t, r.K.Receive(context.Background(), ev), "a replay after the restart")
	require.True(t, pendingEmpty(t, r.Bolt, ch), "the replay was not sent again")
	other := connector.InboundEvent{Conversation: "room-1", EventID: "update-4712", Text: "a new one"}
	require.NoError(t, r.K.Receive(context.Background(), other))
	a.users.wait(t, connector.EventMessageID(other.Conversation, other.EventID), 1)
	require.Equal(t, 1, a.count(id), "the replayed event reached the agent once")
}

func pendingEmpty(t *testing.T, st *boltstore.Store, channelID string) bool {
	es, err := st.List(context.Background(), channelID)
	require.NoError(t, err)
	return len(es) == 0
}

// sendFinal sends m as a final on channel ch through the Client and
// returns its message_id.
func sendFinal(ctx context.Context, c *dataplane.Client, ch string, m imv2.ChatMessage) (string, error) {
	d, err := c.Send(ctx, ch, m)
	if err != nil {
		return "", err
	}
	return d.MessageID(), nil
}

// newReply starts a reply on channel ch through the Client.
func newReply(t *testing.T, c *dataplane.Client, ch string) *dataplane.Reply {
	t.Helper()
	r, err := c.NewReply(ch, "")
	require.NoError(t, err)
	return r
}

// final sends r's final and returns only the error: the outcome comes
// through the agent's callbacks.
func final(ctx context.Context, r *dataplane.Reply, m imv2.ChatMessage) error {
	_, err := r.Final(ctx, m)
	return err
}
