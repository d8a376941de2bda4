package connector_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/state"
)

// smallStore is the kit's default Store with a completed store of 16
// records, so a flood fills it in a few dozen finals.
type smallStore struct {
	imv2.PendingStore
	imv2.ClaimStore
	state.ChannelRegistry
	*state.MemoryBindingStore
}

// TestAttack_FinalsFloodKeepsAnotherChannelsInboundRecord (issue 26,
// attack 2, the kit's side): the kit records each inbound event it handed
// over in the completed store, under its channel, so a replay of the
// event (a platform redelivering it) is skipped. Another channel's peer
// flooding finals used to push that record out, and the replay then
// reached xAgent a second time. Over real connections, with a completed
// store of 16 records: channel A hands over event E; channel B's peer
// sends 100 finals; A's record of E is still there, and E replayed on A
// is skipped — the next event on A arrives and E was seen once. It holds
// by the completed store's per-channel shares (completedshare.go): with
// their protection turned off the record is gone after the flood (and the
// replay is sent again; this xAgent's own completed store then hides it).
// The same with boltstore's completed store (before its layout 2 it
// evicted oldest first, and the record was gone).
func TestAttack_FinalsFloodKeepsAnotherChannelsInboundRecord(t *testing.T) {
	for _, name := range []string{"memory", "boltstore"} {
		t.Run(name, func(t *testing.T) {
			var completed imv2.ClaimStore = imv2.NewMemoryCompletedStore(16, 0, clock.System{})
			if name == "boltstore" {
				bs, err := boltstore.Open(filepath.Join(t.TempDir(), "imv2.db"), boltstore.Options{CompletedCap: 16})
				require.NoError(t, err)
				t.Cleanup(func() { _ = bs.Close() })
				completed = bs
			}
			inboundFlood(t, completed, 1)
		})
	}
}

// TestAttack_ManyChannelsKeepAnotherConnectorsInboundRecord (issue 26):
// as above, but the attacker's connector_id spreads its 100 finals over
// 20 channels. The completed store shares per connector_id first, so the
// attacker's channels dilute only its own share: the kit's record of E
// (in the victim channel's group; on boltstore, a channel whose records
// came without a connector_id, the kit's, form one group) keeps half the
// store. With boltstore's shares per channel only (layout 2), 21
// channels made every share 0 and the record went with the flood.
func TestAttack_ManyChannelsKeepAnotherConnectorsInboundRecord(t *testing.T) {
	for _, name := range []string{"memory", "boltstore"} {
		t.Run(name, func(t *testing.T) {
			var completed imv2.ClaimStore = imv2.NewMemoryCompletedStore(16, 0, clock.System{})
			if name == "boltstore" {
				bs, err := boltstore.Open(filepath.Join(t.TempDir(), "imv2.db"), boltstore.Options{CompletedCap: 16})
				require.NoError(t, err)
				t.Cleanup(func() { _ = bs.Close() })
				completed = bs
			}
			inboundFlood(t, completed, 20)
		})
	}
}

// inboundFlood runs the flood of channels attacker channels.
func inboundFlood(t *testing.T, completed imv2.ClaimStore, channels int) {
	st := &smallStore{imv2.NewMemoryPendingStore(0), completed, state.NewMemoryRegistry(0), state.NewMemoryBindingStore(0)}
	p := newPretend(0)
	k, url := startKit(t, p, "", connector.Options{Store: st})
	victim, attacker := newAgent(), newAgent()
	_, chA := victim.dial(t, url)
	client, chB := attacker.dial(t, url)
	ctx := context.Background()
	flood := []string{chB}
	for len(flood) < channels {
		ch, err := client.OpenChannel(ctx, "")
		require.NoError(t, err)
		flood = append(flood, ch)
	}

	ev := connector.InboundEvent{Conversation: chA, EventID: "update-1", Text: "hello"}
	require.NoError(t, k.Receive(ctx, ev))
	id := connector.EventMessageID(chA, ev.EventID)
	victim.users.wait(t, id, 1)

	for i := range 100 {
		_, err := client.Send(ctx, flood[i%channels], imv2.ChatMessage{Text: fmt.Sprintf("flood %d", i)})
		require.NoError(t, err)
	}
	for range 100 {
		o := attacker.next(t)
		require.Nil(t, o.err, "final %s rejected", o.id)
	}

	_, kept, err := st.Lookup(ctx, chA, id)
	require.NoError(t, err)
	require.True(t, kept, "A's record of E outlived B's flood")
	require.NoError(t, k.Receive(ctx, ev), "the replay")
	next := connector.InboundEvent{Conversation: chA, EventID: "update-2", Text: "after"}
	require.NoError(t, k.Receive(ctx, next))
	victim.users.wait(t, connector.EventMessageID(chA, next.EventID), 1) // in order after any resend of E
	require.Equal(t, 1, victim.count(id), "the replayed event reached xAgent once")
}
