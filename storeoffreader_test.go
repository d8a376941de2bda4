package imv2

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// userCompleted is the in-memory completed store seen as a store that
// does I/O (not this package's type), so its Lookup runs off the reader.
type userCompleted struct{ ClaimStore }

// heldPending is the in-memory pending store seen as one that does I/O,
// whose Remove waits while hold is set.
type heldPending struct {
	PendingStore
	hold    atomic.Bool
	release chan struct{}
	entered chan string
}

func (s *heldPending) Remove(ctx context.Context, channelID, messageID string) error {
	if s.hold.Load() {
		s.entered <- messageID
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
	return s.PendingStore.Remove(ctx, channelID, messageID)
}

// TestStoreOffReader_D11_CompletedMessageDeltasIgnored: with a store that
// does I/O, the first delta's Lookup runs off the reader, and a delta of
// a message already complete is still ignored: no draft is shown, no
// stream stays, no error is answered.
func TestStoreOffReader_D11_CompletedMessageDeltasIgnored(t *testing.T) {
	ignored := make(chan string, 4)
	store := userCompleted{NewMemoryCompletedStore(0, 0, nil)}
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, &Options{Completed: store, Observer: ObserverFunc(func(e Event) {
		if e.Kind == EventDeltaIgnored {
			ignored <- e.MessageID
		}
	})})
	require.NoError(t, store.Record(context.Background(), "cch_1", "done-1", FingerprintOf(&ChatMessage{MessageID: "done-1", Text: "x"})))
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "done-1", 1, "late")))
	require.Equal(t, "done-1", recv(t, ignored))
	c.mu.Lock()
	require.Empty(t, c.deltas, "D11: no stream kept for a completed message")
	c.mu.Unlock()
	// A late delta mid-stream (sequence 2, no stream) of a completed
	// message is ignored too, not refused as a gap.
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "done-1", 2, "later")))
	require.Equal(t, "done-1", recv(t, ignored))
	// Of a message not complete, it is refused as a gap (D4).
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "open-0", 2, "x")))
	require.Equal(t, CodeDeltaSequenceGap, w.next(t).Error.Code)
	// A message not complete streams as before, once its check answered.
	require.NoError(t, c.Receive(context.Background(), deltaPacket(t, "open-1", 1, "hel")))
	require.Equal(t, "hel", recv(t, target.drafted))
	w.none(t)
	require.Empty(t, target.drafts[:len(target.drafts)-1], "no draft of the completed message")
}

// TestStoreOffReader_S1_ResendAfterQueuedRemoveKeepsEntry: an ack's
// Remove runs off the reader; a Send of the same message_id while that
// Remove is still queued waits for it, so the old Remove never deletes
// the new entry (which must stay pending until its own ack, S1).
func TestStoreOffReader_S1_ResendAfterQueuedRemoveKeepsEntry(t *testing.T) {
	store := &heldPending{PendingStore: NewMemoryPendingStore(0), release: make(chan struct{}), entered: make(chan string, 4)}
	c, w, _ := newXAgent(t, newRecTarget(), &Options{Pending: store})
	var once sync.Once
	unhold := func() { once.Do(func() { store.hold.Store(false); close(store.release) }) }
	t.Cleanup(unhold) // before the channel's Close, which waits for the Remove
	ctx := context.Background()
	_, err := c.Send(ctx, ChatMessage{MessageID: "f-1", Text: "x"})
	require.NoError(t, err)
	p := w.next(t)
	store.hold.Store(true)
	require.NoError(t, c.Receive(ctx, ackFor(t, p, AckAccepted, nil)), "the ack returns while its Remove waits")
	require.Equal(t, "f-1", recv(t, store.entered))

	sent := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, ChatMessage{MessageID: "f-1", Text: "x"})
		sent <- err
	}()
	select {
	case err := <-sent:
		t.Fatalf("Send of f-1 returned (%v) before the earlier Remove of f-1 ended", err)
	case <-time.After(50 * time.Millisecond): // a Send racing ahead would return at once
	}
	unhold()
	require.NoError(t, recv(t, sent))
	entries, err := c.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 1, "S1: the new f-1 stays pending until its own ack")
}

// TestStoreOffReader_S2_AckedEntryNotAdoptedAgain: an entry acknowledged
// whose Remove is still queued is in the store but done; AdoptPending (a
// Relay's notice) does not send it again.
func TestStoreOffReader_S2_AckedEntryNotAdoptedAgain(t *testing.T) {
	store := &heldPending{PendingStore: NewMemoryPendingStore(0), release: make(chan struct{}), entered: make(chan string, 4)}
	c, w, _ := newConnector(t, newRecTarget(), &Options{Pending: store})
	var once sync.Once
	unhold := func() { once.Do(func() { store.hold.Store(false); close(store.release) }) }
	t.Cleanup(unhold)
	ctx := context.Background()
	_, err := c.Send(ctx, ChatMessage{MessageID: "u-1", Text: "x"})
	require.NoError(t, err)
	p := w.next(t)
	store.hold.Store(true)
	require.NoError(t, c.Receive(ctx, ackFor(t, p, AckAccepted, nil)))
	require.Equal(t, "u-1", recv(t, store.entered))
	n, err := c.AdoptPending(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "an acknowledged message is not adopted again")
	w.none(t)
}

// failingRemoves is a pending store that does I/O whose Removes fail
// while fail > 0, as with a pool out of connections.
type failingRemoves struct {
	PendingStore
	fail    atomic.Int32
	removes chan error
}

func (s *failingRemoves) Remove(ctx context.Context, channelID, messageID string) error {
	if s.fail.Add(-1) >= 0 {
		err := Errorf(CodeTargetDeliveryFailed, "pgstore: too many connections for role")
		s.removes <- err
		return err
	}
	err := s.PendingStore.Remove(ctx, channelID, messageID)
	s.removes <- err
	return err
}

// TestStoreOffReader_S1_FailedRemoveRetried (issue 38): an acknowledged
// message whose Remove fails is removed by a later try (backoff on the
// Channel's clock), not left stored; its outcome is told once it is gone.
func TestStoreOffReader_S1_FailedRemoveRetried(t *testing.T) {
	store := &failingRemoves{PendingStore: NewMemoryPendingStore(0), removes: make(chan error, 8)}
	store.fail.Store(2)
	delivered := make(chan string, 1)
	c, w, clk := newXAgent(t, newRecTarget(), &Options{Pending: store, OnDelivered: func(_ string, m ChatMessage, _ AckStatus) { delivered <- m.MessageID }})
	ctx := context.Background()
	_, err := c.Send(ctx, ChatMessage{MessageID: "f-1", Text: "x"})
	require.NoError(t, err)
	p := w.next(t)
	base := clk.Pending()
	require.NoError(t, c.Receive(ctx, ackFor(t, p, AckAccepted, nil)))
	require.Error(t, recv(t, store.removes))
	require.NoError(t, clk.BlockUntil(waitCtx(t), base+1)) // the backoff
	clk.Advance(recordRetryMin)
	require.Error(t, recv(t, store.removes))
	require.NoError(t, clk.BlockUntil(waitCtx(t), base+1))
	clk.Advance(2 * recordRetryMin)
	require.NoError(t, recv(t, store.removes))
	require.Equal(t, "f-1", recv(t, delivered))
	entries, err := store.PendingStore.List(ctx, "cch_1")
	require.NoError(t, err)
	require.Empty(t, entries, "the acknowledged entry is gone")
}
