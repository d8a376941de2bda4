package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/state"
)

// ChannelFactory returns a new, empty state.ChannelStore. It registers
// its own cleanup with t.Cleanup.
type ChannelFactory func(t *testing.T) state.ChannelStore

// ChannelReopener closes s and returns a store on the same data, as after
// a restart of the xAgent process.
type ChannelReopener func(t *testing.T, s state.ChannelStore) state.ChannelStore

// TestChannelStore runs the ChannelStore contract (the xAgent side's
// connector_id and channels to reopen, W11) against stores made by
// newStore, which hold at most capacity channel IDs: the connector_id is
// "" until set and the last one set after; ChannelIDs lists the IDs in
// the order added, byte for byte, each once; adding a held ID is a no-op
// that keeps its place, also at the cap; an ID removed and added again
// goes last; removing an ID not held is a no-op; beyond capacity
// AddChannel fails with code connector_channel_unavailable and stores
// nothing, also when many Adds race for the last places (the channel IDs
// are the Connector's, remote input). reopen may be nil for a store that
// is not durable; a durable one must keep the connector_id and the IDs in
// their order across it (S8, W11).
func TestChannelStore(t *testing.T, newStore ChannelFactory, capacity int, reopen ChannelReopener) {
	t.Run("W11_EmptyAtFirst", func(t *testing.T) { channelsEmpty(t, newStore) })
	t.Run("W11_ConnectorIDLastWins", func(t *testing.T) { channelsConnectorID(t, newStore) })
	t.Run("W11_OrderIsAddOrder", func(t *testing.T) { channelsOrder(t, newStore) })
	t.Run("W11_ReAddKeepsPlace", func(t *testing.T) { channelsReAdd(t, newStore) })
	t.Run("W11_RemoveThenAddGoesLast", func(t *testing.T) { channelsRemove(t, newStore) })
	t.Run("W11_CapRefusesNew", func(t *testing.T) { channelsCap(t, newStore, capacity) })
	t.Run("W11_ConcurrentAddsKeepTheCap", func(t *testing.T) { channelsConcurrentCap(t, newStore, capacity) })
	if reopen != nil {
		t.Run("S8_W11_Reopen", func(t *testing.T) { channelsReopen(t, newStore, reopen) })
	}
}

// channelIDs the suite uses beside plain ones: non-ASCII bytes and the
// longest ID a Connector may issue.
var (
	channelIDUnicode = "cch_ünïcödé/+="
	channelIDLongest = "cch_" + strings.Repeat("x", imv2.MaxIDBytes-4)
)

func wantChannelIDs(t *testing.T, s state.ChannelStore, want ...string) {
	t.Helper()
	got, err := s.ChannelIDs(context.Background())
	if err != nil {
		t.Fatalf("ChannelIDs: %v", err)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ChannelIDs = %q; want %q", got, want)
	}
}

func wantConnectorID(t *testing.T, s state.ChannelStore, want string) {
	t.Helper()
	got, err := s.ConnectorID(context.Background())
	if err != nil || got != want {
		t.Fatalf("ConnectorID = %q, %v; want %q", got, err, want)
	}
}

func mustAddChannel(t *testing.T, s state.ChannelStore, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.AddChannel(context.Background(), id); err != nil {
			t.Fatalf("AddChannel(%q): %v", id, err)
		}
	}
}

func mustRemoveChannel(t *testing.T, s state.ChannelStore, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.RemoveChannel(context.Background(), id); err != nil {
			t.Fatalf("RemoveChannel(%q): %v", id, err)
		}
	}
}

func mustSetConnectorID(t *testing.T, s state.ChannelStore, id string) {
	t.Helper()
	if err := s.SetConnectorID(context.Background(), id); err != nil {
		t.Fatalf("SetConnectorID(%q): %v", id, err)
	}
}

func channelsEmpty(t *testing.T, newStore ChannelFactory) {
	s := newStore(t)
	wantConnectorID(t, s, "")
	wantChannelIDs(t, s)
}

func channelsConnectorID(t *testing.T, newStore ChannelFactory) {
	s := newStore(t)
	mustSetConnectorID(t, s, "conn_1")
	wantConnectorID(t, s, "conn_1")
	// A reconnect that got a new connector_id (the Connector forgot the
	// old one) replaces it; the channel IDs stay for the reopen.
	mustAddChannel(t, s, "cch_a")
	mustSetConnectorID(t, s, "conn_ünï/2")
	wantConnectorID(t, s, "conn_ünï/2")
	wantChannelIDs(t, s, "cch_a")
}

func channelsOrder(t *testing.T, newStore ChannelFactory) {
	s := newStore(t)
	ids := []string{"cch_b", channelIDLongest, "cch_a", channelIDUnicode, "cch_c"}
	mustAddChannel(t, s, ids...)
	wantChannelIDs(t, s, ids...)
}

func channelsReAdd(t *testing.T, newStore ChannelFactory) {
	s := newStore(t)
	mustAddChannel(t, s, "cch_b", "cch_a", "cch_c", "cch_a", "cch_b")
	wantChannelIDs(t, s, "cch_b", "cch_a", "cch_c")
}

func channelsRemove(t *testing.T, newStore ChannelFactory) {
	s := newStore(t)
	mustAddChannel(t, s, "cch_b", "cch_a", "cch_c")
	mustRemoveChannel(t, s, "cch_a", "cch_never", "cch_a")
	wantChannelIDs(t, s, "cch_b", "cch_c")
	mustAddChannel(t, s, "cch_a")
	wantChannelIDs(t, s, "cch_b", "cch_c", "cch_a")
	mustRemoveChannel(t, s, "cch_b", "cch_c", "cch_a")
	wantChannelIDs(t, s)
}

// fill adds n channel IDs cch_0000 … and returns them.
func fill(t *testing.T, s state.ChannelStore, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("cch_%04d", i)
	}
	mustAddChannel(t, s, ids...)
	return ids
}

func wantCapRefusal(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, &imv2.Error{Code: imv2.CodeChannelUnavailable}) {
		t.Fatalf("%s: %v; want code %s", what, err, imv2.CodeChannelUnavailable)
	}
}

func channelsCap(t *testing.T, newStore ChannelFactory, capacity int) {
	s, ctx := newStore(t), context.Background()
	ids := fill(t, s, capacity)
	wantCapRefusal(t, s.AddChannel(ctx, "cch_one_too_many"), "AddChannel beyond the cap")
	mustAddChannel(t, s, ids[0]) // a held ID is still a no-op at the cap
	wantChannelIDs(t, s, ids...)
	mustRemoveChannel(t, s, ids[1])
	mustAddChannel(t, s, "cch_in_the_freed_place")
	wantChannelIDs(t, s, append(slices.Delete(slices.Clone(ids), 1, 2), "cch_in_the_freed_place")...)
}

// channelsConcurrentCap: 16 Adds race for the last 4 places: exactly 4
// succeed, the rest are refused, and the store holds its cap, not more
// (a cap checked apart from the insert lets them all in).
func channelsConcurrentCap(t *testing.T, newStore ChannelFactory, capacity int) {
	const racers, free = 16, 4
	if capacity <= free {
		t.Fatalf("capacity %d: the suite needs more than %d", capacity, free)
	}
	s, ctx := newStore(t), context.Background()
	ids := fill(t, s, capacity-free)
	var (
		mu  sync.Mutex
		won []string
	)
	together(racers, func(i int) {
		id := fmt.Sprintf("cch_racer_%02d", i)
		err := s.AddChannel(ctx, id)
		if err != nil && !errors.Is(err, &imv2.Error{Code: imv2.CodeChannelUnavailable}) {
			t.Errorf("AddChannel(%q): %v", id, err)
			return
		}
		// Every racer also re-adds a held ID: a no-op, never refused.
		if err := s.AddChannel(ctx, ids[0]); err != nil {
			t.Errorf("re-AddChannel(%q) while racing: %v", ids[0], err)
		}
		if err == nil {
			mu.Lock()
			won = append(won, id)
			mu.Unlock()
		}
	})
	if len(won) != free {
		t.Fatalf("%d of %d racing Adds for %d free places succeeded: %q", len(won), racers, free, won)
	}
	got, err := s.ChannelIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != capacity || !slices.Equal(got[:capacity-free], ids) {
		t.Fatalf("ChannelIDs holds %d IDs, want the %d filled then the %d winners", len(got), capacity-free, free)
	}
	slices.Sort(won)
	tail := slices.Sorted(slices.Values(got[capacity-free:]))
	if !slices.Equal(tail, won) {
		t.Fatalf("the last places hold %q; want the winners %q", tail, won)
	}
}

func channelsReopen(t *testing.T, newStore ChannelFactory, reopen ChannelReopener) {
	s := newStore(t)
	mustSetConnectorID(t, s, "conn_1")
	mustAddChannel(t, s, "cch_b", channelIDUnicode, "cch_a", "cch_c")
	mustRemoveChannel(t, s, "cch_a")
	s = reopen(t, s)
	wantConnectorID(t, s, "conn_1")
	wantChannelIDs(t, s, "cch_b", channelIDUnicode, "cch_c")
	// The order goes on after the restart: a new ID goes last, a removed
	// one added again too.
	mustAddChannel(t, s, "cch_d", "cch_a")
	wantChannelIDs(t, s, "cch_b", channelIDUnicode, "cch_c", "cch_d", "cch_a")
	s = reopen(t, s)
	wantChannelIDs(t, s, "cch_b", channelIDUnicode, "cch_c", "cch_d", "cch_a")
}
