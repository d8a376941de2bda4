package imv2

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// renewingStore is a memory ClaimStore with RenewClaim, counting renewals,
// and with Records that fail while failRecords > 0.
type renewingStore struct {
	ClaimStore
	claimed chan struct{} // one send per Claim
	records chan error    // one send per Record, its result

	mu          sync.Mutex
	renewals    int
	failRecords int
}

func newRenewingStore(inner ClaimStore) *renewingStore {
	return &renewingStore{ClaimStore: inner, claimed: make(chan struct{}, 16), records: make(chan error, 16)}
}

func (s *renewingStore) Claim(ctx context.Context, ch, id string, fp Fingerprint, owner string, lease time.Duration) (Claim, error) {
	cl, err := s.ClaimStore.Claim(ctx, ch, id, fp, owner, lease)
	s.claimed <- struct{}{}
	return cl, err
}

// RenewClaim: the memory store's Claim by the same owner re-leases a
// claim the owner holds (reported orphaned to it), which is a renewal.
func (s *renewingStore) RenewClaim(ctx context.Context, ch, id, owner string, lease time.Duration) (bool, error) {
	s.mu.Lock()
	s.renewals++
	s.mu.Unlock()
	cl, err := s.ClaimStore.Claim(ctx, ch, id, Fingerprint{}, owner, lease)
	if err != nil {
		return false, err
	}
	if cl.State == ClaimAcquired { // there was none: do not make one
		return false, s.Release(ctx, ch, id, owner)
	}
	return cl.State == ClaimOrphaned && cl.Owner == owner, nil
}

func (s *renewingStore) Record(ctx context.Context, ch, id string, fp Fingerprint) error {
	s.mu.Lock()
	fail := s.failRecords > 0
	s.failRecords--
	s.mu.Unlock()
	err := errors.New("database away")
	if !fail {
		err = s.ClaimStore.Record(ctx, ch, id, fp)
	}
	s.records <- err
	return err
}

func (s *renewingStore) renewed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewals
}

// TestChannel_S8_A6_ClaimRenewedWhileTheTargetRuns: with a ClaimRenewer,
// a post that runs past the lease keeps its claim: another owner finds it
// held, not orphaned, and the renewals stop once Record ended the claim.
func TestChannel_S8_A6_ClaimRenewedWhileTheTargetRuns(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	c, w, clk := newConnector(t, target, &Options{TargetTimeout: time.Minute, ClaimLease: 3 * time.Second})
	store := newRenewingStore(NewMemoryCompletedStore(0, 0, clk))
	c.o.Completed = store

	base := clk.Pending()
	p := finalPacket(t, "a1", "hello")
	go func() { _ = c.Receive(context.Background(), p) }()
	<-store.claimed
	require.NoError(t, clk.BlockUntil(waitCtx(t), base+2)) // the renewal's timer and the post's timeout
	// 5 s in all, past the 3 s lease.
	for i := 1; i <= 5; i++ {
		clk.Advance(time.Second)
		require.Equal(t, i, store.renewed(), "one renewal per ClaimLease/3")
	}
	fp := FingerprintOf(&ChatMessage{MessageID: "a1", Text: "hello"})
	other, err := store.ClaimStore.Claim(context.Background(), "cch_1", "a1", fp, "other replica", 3*time.Second)
	require.NoError(t, err)
	require.Equal(t, ClaimHeld, other.State, "a live delivery keeps its claim past the lease")

	close(target.gate)
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	require.NoError(t, <-store.records)
	clk.Advance(10 * time.Second)
	require.Equal(t, 5, store.renewed(), "no renewal after Record")
}

// TestChannel_S8_FailedRecordRetriedWhileClaimRenewed: a Record that fails
// after the post is tried again with backoff while the claim is renewed,
// so the message ends completed, not orphaned: its resend is a duplicate.
func TestChannel_S8_FailedRecordRetriedWhileClaimRenewed(t *testing.T) {
	target := newRecTarget()
	c, w, clk := newConnector(t, target, nil)
	store := newRenewingStore(NewMemoryCompletedStore(0, 0, clk))
	store.failRecords = 2
	c.o.Completed = store

	base := clk.Pending()
	p := finalPacket(t, "a1", "hello")
	go func() { _ = c.Receive(context.Background(), p) }()
	<-store.claimed
	require.Error(t, <-store.records)
	require.NoError(t, clk.BlockUntil(waitCtx(t), base+2)) // the renewal and the backoff
	clk.Advance(recordRetryMin)
	require.Error(t, <-store.records)
	require.NoError(t, clk.BlockUntil(waitCtx(t), base+2))
	clk.Advance(2 * recordRetryMin)
	require.NoError(t, <-store.records)
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)

	again := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), again))
	require.Equal(t, AckDuplicate, ackOf(t, again, w.next(t)).Status, "S8: recorded after all, so the resend is a duplicate")
	require.Equal(t, 1, target.postCount("a1"))
}

// waitCtx bounds a BlockUntil, so code that never arms its timer fails
// the test instead of hanging it.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// slowClaim is a renewingStore whose Claim takes `took` on the fake
// clock, as a Claim held up by a slow database does.
type slowClaim struct {
	*renewingStore
	clk  interface{ Advance(time.Duration) }
	took time.Duration
}

func (s *slowClaim) Claim(ctx context.Context, ch, id string, fp Fingerprint, owner string, lease time.Duration) (Claim, error) {
	cl, err := s.ClaimStore.Claim(ctx, ch, id, fp, owner, lease)
	s.clk.Advance(s.took)
	s.claimed <- struct{}{}
	return cl, err
}

// TestChannel_S8_A6_NoPostOnALeaseThatMayLapse (issue 38): a Claim that
// returns when less than a third of its lease is known to remain does not
// start the post (the lease could lapse under it and another owner post
// too): the final is answered retryable, its claim released, and the
// resend, claimed promptly, is posted once.
func TestChannel_S8_A6_NoPostOnALeaseThatMayLapse(t *testing.T) {
	target := newRecTarget()
	c, w, clk := newConnector(t, target, &Options{TargetTimeout: time.Second, ClaimLease: 3 * time.Second})
	store := &slowClaim{renewingStore: newRenewingStore(NewMemoryCompletedStore(0, 0, clk)), clk: clk, took: 2500 * time.Millisecond}
	c.o.Completed = store

	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	<-store.claimed
	ack := ackOf(t, p, w.next(t))
	require.Equal(t, AckRejected, ack.Status, "not posted on a lease 2.5 s into 3 s")
	require.True(t, ack.Retryable)
	require.Equal(t, CodeTargetDeliveryFailed, ack.Code)
	require.Equal(t, 0, target.postCount("a1"))
	fp := FingerprintOf(&ChatMessage{MessageID: "a1", Text: "hello"})
	other, err := store.ClaimStore.Claim(context.Background(), "cch_1", "a1", fp, "other replica", 3*time.Second)
	require.NoError(t, err)
	require.Equal(t, ClaimAcquired, other.State, "the claim was released")
	require.NoError(t, store.ClaimStore.Release(context.Background(), "cch_1", "a1", "other replica"))

	store.took = 0
	again := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), again))
	<-store.claimed
	require.Equal(t, AckAccepted, ackOf(t, again, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("a1"))
}
