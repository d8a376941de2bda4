package imv2

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/fakeclock"
)

// TestMemoryCompletedStore_S6_FullStoreRefusesRatherThanEvictProtected:
// with the store full (records and claims in flight) and every candidate
// record younger than the resend horizon and within its channel's share,
// a new claim is refused channel_busy, retryable, and nothing is evicted;
// past the horizon the oldest goes as before. Before, the claim was
// admitted and its record then pushed out the oldest, a's.
func TestMemoryCompletedStore_S6_FullStoreRefusesRatherThanEvictProtected(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	s := newMemoryCompletedStore(4, 24*time.Hour, clk)
	require.NoError(t, s.Record(ctx, "a", "m1", Fingerprint{1}))
	require.NoError(t, s.Record(ctx, "b", "m1", Fingerprint{2}))
	for _, id := range []string{"x1", "x2"} {
		cl, err := s.Claim(ctx, "c", id, Fingerprint{3}, "me", time.Minute)
		require.NoError(t, err)
		require.Equal(t, ClaimAcquired, cl.State)
	}
	_, err := s.Claim(ctx, "d", "y1", Fingerprint{4}, "me", time.Minute)
	require.ErrorIs(t, err, &Error{Code: CodeChannelBusy})
	require.True(t, IsRetryable(err))
	_, found, _ := s.Lookup(ctx, "a", "m1")
	require.True(t, found, "nothing evicted")

	clk.Advance(resendHorizon)
	cl, err := s.Claim(ctx, "d", "y1", Fingerprint{4}, "me", time.Minute)
	require.NoError(t, err, "past the horizon the oldest record may go")
	require.Equal(t, ClaimAcquired, cl.State)
	_, found, _ = s.Lookup(ctx, "a", "m1")
	require.False(t, found)
}

// TestMemoryCompletedStore_S6_FloodEvictsItsOwnRecords: one channel
// records three times the capacity; the one record of another channel,
// within its share and young, stays, and the flooding channel keeps the
// rest of the capacity, its newest records.
func TestMemoryCompletedStore_S6_FloodEvictsItsOwnRecords(t *testing.T) {
	ctx := context.Background()
	s := newMemoryCompletedStore(10, time.Hour, fakeclock.New(time.Unix(1_700_000_000, 0)))
	require.NoError(t, s.Record(ctx, "victim", "v1", Fingerprint{1}))
	for i := range 30 {
		require.NoError(t, s.Record(ctx, "flood", "f"+strconv.Itoa(i), Fingerprint{2}))
	}
	require.Equal(t, 10, s.Len())
	_, found, _ := s.Lookup(ctx, "victim", "v1")
	require.True(t, found)
	_, found, _ = s.Lookup(ctx, "flood", "f29")
	require.True(t, found)
	_, found, _ = s.Lookup(ctx, "flood", "f20")
	require.False(t, found)
	require.Len(t, s.lru.Of("flood"), 9)
}

// TestChannel_S6_FullCompletedStoreAnswersChannelBusy: a final whose claim
// a full store refuses (every candidate record protected) is answered
// channel_busy, retryable, and not posted; before, a Claim error became
// target_delivery_failed ("idempotency store unavailable").
func TestChannel_S6_FullCompletedStoreAnswersChannelBusy(t *testing.T) {
	ctx := context.Background()
	store := newMemoryCompletedStore(3, 24*time.Hour, fakeclock.New(time.Unix(1_700_000_000, 0)))
	require.NoError(t, store.Record(ctx, "a", "m1", Fingerprint{1}))
	require.NoError(t, store.Record(ctx, "b", "m1", Fingerprint{2}))
	_, err := store.Claim(ctx, "b", "x", Fingerprint{3}, "elsewhere", time.Hour)
	require.NoError(t, err)
	target := newRecTarget()
	c, w, _ := newConnector(t, target, &Options{Completed: store})
	p := finalPacket(t, "f1", "hello")
	require.NoError(t, c.Receive(ctx, p)) // delivered in the background; the ack tells
	a := ackOf(t, p, w.next(t))
	require.Equal(t, AckRejected, a.Status)
	require.Equal(t, CodeChannelBusy, a.Code)
	require.True(t, a.Retryable)
	require.Zero(t, target.postCount("f1"))
}
