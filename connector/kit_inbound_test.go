package connector_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/state"
)

// failures collects the user messages whose delivery to xAgent failed.
type failures struct {
	mu   sync.Mutex
	errs []*imv2.Error
}

func (f *failures) record(_ string, _ imv2.ChatMessage, err *imv2.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

func (f *failures) got() []*imv2.Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*imv2.Error(nil), f.errs...)
}

func fileEvent(eventID string) connector.InboundEvent {
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte("a photo"))), nil }
	return connector.InboundEvent{Conversation: "room-1", EventID: eventID, Text: "look",
		Files: []connector.InboundFile{{Filename: "photo.jpg", MimeType: "image/jpeg", Open: open}}}
}

// TestKit_M6_S1_S6_ReplayedFileEventIsNoConflictAcrossRestart: an inbound
// platform event carrying a file, received again — while pending, after its
// ack, and after the Connector restarted on the same boltstore file — is
// skipped: no second copy of the file is stored, no message_id_conflict
// comes back, and xAgent got the message once.
func TestKit_M6_S1_S6_ReplayedFileEventIsNoConflictAcrossRestart(t *testing.T) {
	t.Parallel()
	files := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
	var failed failures
	acked := newSeen()
	r := startRestartable(t, func(st *boltstore.Store) (*connector.Connector, error) {
		return connector.New(kitCard(""), newPretend(0), &connector.Options{
			Store: st, Files: files, DefaultConversation: func(string) string { return "room-1" },
			Advanced: connector.Advanced{Channel: &imv2.Options{OnFailed: failed.record, OnDelivered: acked.delivered}},
		})
	})
	stored := func() int { n, _ := files.Len(); return n }
	a := newAgent()
	_, ch := a.dial(t, r.URL())
	ev := fileEvent("update-1")
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	require.NoError(t, r.K.Receive(context.Background(), ev))
	require.NoError(t, r.K.Receive(context.Background(), ev), "a replay while pending")
	acked.wait(t, id, 1)
	require.Equal(t, 1, a.count(id))
	require.True(t, pendingEmpty(t, r.Bolt, ch))
	require.NoError(t, r.K.Receive(context.Background(), ev), "a replay after the ack")
	next := fileEvent("update-2")
	require.NoError(t, r.K.Receive(context.Background(), next))
	acked.wait(t, connector.EventMessageID("room-1", "update-2"), 1)
	require.True(t, pendingEmpty(t, r.Bolt, ch))
	require.Equal(t, 2, stored(), "one stored file per event, none per replay")
	r.stop()

	r.restart()
	defer r.stop()
	a.reopened(t, ch, 1)
	require.NoError(t, r.K.Receive(context.Background(), ev), "a replay after the restart")
	last := fileEvent("update-3")
	require.NoError(t, r.K.Receive(context.Background(), last))
	acked.wait(t, connector.EventMessageID("room-1", "update-3"), 1)
	require.True(t, pendingEmpty(t, r.Bolt, ch))
	require.Equal(t, 3, stored(), "one stored file per event, none per replay")
	require.Empty(t, failed.got(), "a replay was answered as a failure")
	require.Equal(t, 1, a.count(id), "xAgent got the replayed event once")
}

// TestKit_M6_FailedOfferDoesNotStopOtherChannels: when storing an event's
// file fails for one bound channel, the others still get the message and
// Receive's error names the one that failed; receiving the event again
// reaches that one and skips the others.
func TestKit_M6_FailedOfferDoesNotStopOtherChannels(t *testing.T) {
	t.Parallel()
	files := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
	k, url := startKit(t, newPretend(0), "", connector.Options{Files: files, DefaultConversation: func(string) string { return "room-1" }})
	a := newAgent()
	c, ch := a.dial(t, url)
	other, err := c.OpenChannel(context.Background(), "")
	require.NoError(t, err)
	require.True(t, k.Server().IsOpen(ch) && k.Server().IsOpen(other), "open once OpenChannel returned")
	var opens atomic.Int32
	ev := fileEvent("update-1")
	ev.Files[0].Open = func() (io.ReadCloser, error) {
		if opens.Add(1) == 1 {
			return nil, errors.New("platform download failed")
		}
		return io.NopCloser(bytes.NewReader([]byte("a photo"))), nil
	}
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	err = k.Receive(context.Background(), ev)
	require.Error(t, err, "a channel's failed offer is reported")
	a.users.wait(t, id, 1)
	require.NoError(t, k.Receive(context.Background(), ev), "the event again")
	a.users.wait(t, id, 2)
	n, _ := files.Len()
	require.Equal(t, 2, n, "one stored file per channel")
	require.Equal(t, int32(3), opens.Load(), "the channel reached first is skipped the second time")
}

// memRelay is an in-memory Relay between two Connectors on one Store: a
// channel not open on its own Server is sent through its peer's.
type memRelay struct {
	peer   *memRelay
	mu     sync.Mutex
	srv    state.OpenChannels
	opened []string
	sends  int
}

func (r *memRelay) Serve(srv state.OpenChannels) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv = srv
}

func (r *memRelay) ChannelOpened(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opened = append(r.opened, id)
}

func (r *memRelay) server() state.OpenChannels {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv
}

func (r *memRelay) Send(ctx context.Context, channelID string, m imv2.ChatMessage) (string, error) {
	r.mu.Lock()
	r.sends++
	r.mu.Unlock()
	for _, srv := range []state.OpenChannels{r.server(), r.peer.server()} {
		if srv != nil && srv.IsOpen(channelID) {
			return srv.Channel(channelID).Send(ctx, m)
		}
	}
	return "", connector.ErrNoChannel
}

// TestKit_M9_ReceiveOnAReplicaGoesThroughTheRelay: two Connectors share a
// Store; xAgent's connection is on one. An event received on the other
// reaches xAgent through Options.Advanced.Relay, once: a replay on either replica is
// skipped. The kit wires the Relay's Serve and ChannelOpened.
func TestKit_M9_ReceiveOnAReplicaGoesThroughTheRelay(t *testing.T) {
	t.Parallel()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	holder, replica := &memRelay{}, &memRelay{}
	holder.peer, replica.peer = replica, holder
	conv := func(string) string { return "room-1" }
	acked := newSeen()
	k1, url := startKit(t, newPretend(0), "", connector.Options{Store: st, DefaultConversation: conv,
		Advanced: connector.Advanced{Relay: holder, Channel: &imv2.Options{OnDelivered: acked.delivered}}})
	k2, _ := startKit(t, newPretend(0), "", connector.Options{Store: st, Advanced: connector.Advanced{Relay: replica}, DefaultConversation: conv})
	require.Same(t, k1.Server(), holder.server(), "Relay.Serve got the Server")
	require.Same(t, k2.Server(), replica.server())
	a := newAgent()
	_, ch := a.dial(t, url)
	require.True(t, k1.Server().IsOpen(ch), "open once OpenChannel returned")
	holder.mu.Lock()
	require.Equal(t, []string{ch}, holder.opened, "Relay.ChannelOpened told")
	holder.mu.Unlock()

	ev := connector.InboundEvent{Conversation: "room-1", EventID: "update-1", Text: "hello from the other replica"}
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	require.NoError(t, k2.Receive(context.Background(), ev))
	acked.wait(t, id, 1)
	require.Equal(t, 1, a.count(id))
	require.True(t, pendingEmpty(t, st, ch))
	require.NoError(t, k2.Receive(context.Background(), ev), "a replay on the replica")
	require.NoError(t, k1.Receive(context.Background(), ev), "a replay on the holder")
	next := connector.InboundEvent{Conversation: "room-1", EventID: "update-2", Text: "next"}
	require.NoError(t, k2.Receive(context.Background(), next))
	a.users.wait(t, connector.EventMessageID("room-1", "update-2"), 1)
	require.Equal(t, 1, a.count(id), "xAgent got the event once")
	replica.mu.Lock()
	defer replica.mu.Unlock()
	require.Equal(t, 2, replica.sends, "the replica sent both events through its Relay, no replay")
}

// TestKit_M6_S6_ConcurrentReplaysStoreOneCopy: the same file event
// received by 8 goroutines at once is one message whose file is read and
// stored once; no Receive fails with message_id_conflict.
func TestKit_M6_S6_ConcurrentReplaysStoreOneCopy(t *testing.T) {
	t.Parallel()
	files := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
	k, url := startKit(t, newPretend(0), "", connector.Options{Files: files, DefaultConversation: func(string) string { return "room-1" }})
	a := newAgent()
	_, ch := a.dial(t, url)
	require.True(t, k.Server().IsOpen(ch), "open once OpenChannel returned")
	ev := fileEvent("update-1")
	var opens atomic.Int32
	ev.Files[0].Open = func() (io.ReadCloser, error) {
		opens.Add(1)
		return io.NopCloser(bytes.NewReader([]byte("a photo"))), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- k.Receive(context.Background(), ev) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	a.users.wait(t, connector.EventMessageID("room-1", "update-1"), 1)
	n, _ := files.Len()
	require.Equal(t, 1, n, "one stored file")
	require.Equal(t, int32(1), opens.Load(), "the file was read once")
}
