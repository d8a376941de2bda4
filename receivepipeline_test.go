package imv2

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedRecordStore is a memory ClaimStore whose Record of a message held
// by gate waits until the gate is closed; it reports each Claim and each
// Record's start and end.
type gatedRecordStore struct {
	ClaimStore
	claimed  chan string
	recorded chan string // a Record's start
	done     chan string // a Record's end

	mu    sync.Mutex
	gates map[string]chan struct{}
}

func newGatedRecordStore(inner ClaimStore) *gatedRecordStore {
	return &gatedRecordStore{ClaimStore: inner, claimed: make(chan string, 16), recorded: make(chan string, 16), done: make(chan string, 16), gates: map[string]chan struct{}{}}
}

// gate makes the Record of id wait until the returned channel is closed.
func (s *gatedRecordStore) gate(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := make(chan struct{})
	s.gates[id] = g
	return g
}

func (s *gatedRecordStore) Claim(ctx context.Context, ch, id string, fp Fingerprint, owner string, lease time.Duration) (Claim, error) {
	cl, err := s.ClaimStore.Claim(ctx, ch, id, fp, owner, lease)
	s.claimed <- id
	return cl, err
}

func (s *gatedRecordStore) Record(ctx context.Context, ch, id string, fp Fingerprint) error {
	s.recorded <- id
	s.mu.Lock()
	g := s.gates[id]
	s.mu.Unlock()
	if g != nil {
		<-g
	}
	err := s.ClaimStore.Record(ctx, ch, id, fp)
	s.done <- id
	return err
}

// TestChannel_M14_S8_NextFinalClaimedWhileRecordRuns: a channel's next
// final is claimed and posted while the previous final's Record is still
// running, so a group-committing store can carry both calls in one commit;
// the first final is acked only once its Record returned.
func TestChannel_M14_S8_NextFinalClaimedWhileRecordRuns(t *testing.T) {
	target := newRecTarget()
	c, w, clk := newConnector(t, target, nil)
	store := newGatedRecordStore(NewMemoryCompletedStore(0, 0, clk))
	c.o.Completed = store
	open, once := store.gate("f1"), new(sync.Once)
	t.Cleanup(func() { once.Do(func() { close(open) }) }) // before Close, which waits for the Record

	p1, p2 := finalPacket(t, "f1", "one"), finalPacket(t, "f2", "two")
	require.NoError(t, c.Receive(context.Background(), p1))
	require.NoError(t, c.Receive(context.Background(), p2))
	require.Equal(t, "f1", recv(t, store.claimed))
	require.Equal(t, "f2", recv(t, store.claimed), "f2 is claimed while f1's Record is held")
	for recv(t, store.recorded) != "f1" { // f2's may begin first
	}
	require.Equal(t, "f1", recv(t, target.posted))
	require.Equal(t, "f2", recv(t, target.posted), "f2 is posted after f1's post, while f1's Record runs")
	w.none(t) // f1 is not acked before its Record returned

	once.Do(func() { close(open) })
	require.Equal(t, AckAccepted, ackOf(t, p1, w.next(t)).Status)
	require.Equal(t, AckAccepted, ackOf(t, p2, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("f1"))
	require.Equal(t, 1, target.postCount("f2"))
}

// TestChannel_M14_AcksInOrderWhenALaterRecordEndsFirst: when a final's
// Record returns before the previous final's, its ack still waits for the
// previous one: a channel's acks leave in the order its finals arrived.
func TestChannel_M14_AcksInOrderWhenALaterRecordEndsFirst(t *testing.T) {
	target := newRecTarget()
	c, w, clk := newConnector(t, target, nil)
	store := newGatedRecordStore(NewMemoryCompletedStore(0, 0, clk))
	c.o.Completed = store
	open, once := store.gate("f1"), new(sync.Once)
	t.Cleanup(func() { once.Do(func() { close(open) }) }) // before Close, which waits for the Record

	p1, p2 := finalPacket(t, "f1", "one"), finalPacket(t, "f2", "two")
	require.NoError(t, c.Receive(context.Background(), p1))
	require.NoError(t, c.Receive(context.Background(), p2))
	// The two Records run at once, begun in either order.
	require.ElementsMatch(t, []string{"f1", "f2"}, []string{recv(t, store.recorded), recv(t, store.recorded)})
	require.Equal(t, "f2", recv(t, store.done), "f2's Record returns while f1's still runs")
	w.none(t)

	once.Do(func() { close(open) })
	require.Equal(t, "f1", recv(t, store.done))
	first, second := w.next(t), w.next(t)
	require.Equal(t, "f1", ackOf(t, p1, first).MessageID, "f1 is acked first")
	require.Equal(t, "f2", ackOf(t, p2, second).MessageID)
}
