package imv2

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A message another replica added to the shared pending store is sent by
// the replica that adopts it, in the store's order, once; a second
// AdoptPending adopts nothing and sends nothing.
func TestAdoptPending_S1_SendsEntriesAddedElsewhereOnce(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryPendingStore(0)
	c, w, clk := newConnector(t, newRecTarget(), &Options{Pending: store})
	_, err := c.Send(ctx, ChatMessage{MessageID: "u-local", Text: "mine"})
	require.NoError(t, err)
	require.Equal(t, "u-local", chatID(t, w.next(t)))
	for _, id := range []string{"u-1", "u-2"} { // another replica's Adds
		require.NoError(t, store.Add(ctx, PendingEntry{ChannelID: "cch_1", Message: ChatMessage{MessageID: id, Text: id}, Created: clk.Now()}))
	}
	n, err := c.AdoptPending(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, "u-1", chatID(t, w.next(t)))
	require.Equal(t, "u-2", chatID(t, w.next(t)))
	n, err = c.AdoptPending(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	w.none(t)
	got, err := c.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, got, 3)
}

func chatID(t *testing.T, p *Packet) string {
	t.Helper()
	require.Equal(t, TypeChatMessage, p.Type)
	var m ChatMessage
	require.NoError(t, p.DecodePayload(&m))
	return m.MessageID
}

// A message this Channel tracks while disconnected, which another replica
// delivered (its entry is gone from the shared store), is forgotten at
// the end of its pending TTL instead of reported expired; one the store
// still holds is reported expired.
func TestAdoptPending_S3_CopyResolvedElsewhereIsNotReportedExpired(t *testing.T) {
	for _, elsewhere := range []bool{true, false} {
		ctx := context.Background()
		store := NewMemoryPendingStore(0)
		var failed []string
		c, w, clk := newConnector(t, newRecTarget(), &Options{Pending: store, OnFailed: func(_ string, m ChatMessage, _ *Error) {
			failed = append(failed, m.MessageID)
		}})
		_, err := c.Send(ctx, ChatMessage{MessageID: "u-1", Text: "hi"})
		require.NoError(t, err)
		w.next(t)
		c.SetTransport(nil) // xAgent went to another replica
		if elsewhere {
			require.NoError(t, store.Remove(ctx, "cch_1", "u-1")) // which delivered it
		}
		clk.Advance(defaultPendingTTL + time.Second)
		require.Eventually(t, func() bool { p, _ := c.Pending(ctx); return len(p) == 0 }, wait, time.Millisecond)
		require.NoError(t, c.Close())
		if elsewhere {
			require.Empty(t, failed, "a message another replica delivered was reported failed")
		} else {
			require.Equal(t, []string{"u-1"}, failed)
		}
	}
}
