package imv2

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/connid"
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
	require.True(t, SafeToRetry(err))
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

// TestMemoryCompletedStore_S6_ManyChannelsDiluteOnlyTheirOwnConnector:
// the shares are per connector_id first (the one a call's context carries,
// internal/connid, set by the Channel), then per channel within it.
// Connector V's one channel holds 5 records; connector A floods from 50
// channels, 150 records into a store of 20. V's records stay (V's share is
// half the store); A keeps the rest. With shares per channel only, 51
// channels made every share 0 and V's records went.
func TestMemoryCompletedStore_S6_ManyChannelsDiluteOnlyTheirOwnConnector(t *testing.T) {
	bg := context.Background()
	s := newMemoryCompletedStore(20, 24*time.Hour, fakeclock.New(time.Unix(1_700_000_000, 0)))
	v, a := connid.WithConnectorID(bg, "V"), connid.WithConnectorID(bg, "A")
	for i := range 5 {
		require.NoError(t, s.Record(v, "v", "v"+strconv.Itoa(i), Fingerprint{1}))
	}
	for i := range 150 {
		require.NoError(t, s.Record(a, "a"+strconv.Itoa(i%50), "f"+strconv.Itoa(i), Fingerprint{2}))
	}
	for i := range 5 {
		_, found, _ := s.Lookup(bg, "v", "v"+strconv.Itoa(i))
		require.True(t, found, "V's record v%d", i)
	}
	require.Equal(t, 20, s.Len())
}

// TestMemoryCompletedStore_S6_GroupsComeAndGo: groups are counted by the
// channels holding records, and a group whose channels' records all left
// is gone from the FIFO.
func TestMemoryCompletedStore_S6_GroupsComeAndGo(t *testing.T) {
	ctx := context.Background()
	s := newMemoryCompletedStore(10, time.Hour, fakeclock.New(time.Unix(1_700_000_000, 0)))
	require.NoError(t, s.Record(connid.WithConnectorID(ctx, "A"), "a", "1", Fingerprint{1}))
	require.NoError(t, s.Record(connid.WithConnectorID(ctx, "B"), "b", "1", Fingerprint{1}))
	require.NoError(t, s.Record(ctx, "c", "1", Fingerprint{1})) // no connector_id: group ""
	require.Equal(t, 3, s.lru.ngroups)
	g, ok := s.lru.groupName("a")
	require.True(t, ok)
	require.Equal(t, "A", g)
	require.NoError(t, s.DropChannel(ctx, "a"))
	require.Equal(t, 2, s.lru.ngroups)
	require.NotContains(t, s.lru.groupIDs, "A")
	require.NoError(t, s.Handover(ctx, "b", "d")) // a call with no connector_id: b's group
	g, _ = s.lru.groupName("d")
	require.Equal(t, "B", g)
}
