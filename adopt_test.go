package imv2

import (
	"context"
	"testing"

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
