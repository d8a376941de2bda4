package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/state"
)

// TestChannelStore_SurvivesReopen: the xAgent side's connector_id and
// channel IDs outlive the process, in the order added; duplicates and
// removals of unknown IDs are no-ops; the cap holds.
func TestChannelStore_SurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	id, err := s.ConnectorID(ctx)
	require.NoError(t, err)
	require.Empty(t, id)
	require.NoError(t, s.SetConnectorID(ctx, "conn_1"))
	for _, ch := range []string{"cch_b", "cch_a", "cch_c", "cch_a"} {
		require.NoError(t, s.AddChannel(ctx, ch))
	}
	require.NoError(t, s.RemoveChannel(ctx, "cch_c"))
	require.NoError(t, s.RemoveChannel(ctx, "cch_never"))
	require.NoError(t, s.Close())

	s, err = boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	defer s.Close()
	id, err = s.ConnectorID(ctx)
	require.NoError(t, err)
	require.Equal(t, "conn_1", id)
	ids, err := s.ChannelIDs(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"cch_b", "cch_a"}, ids)

	for i := len(ids); i < state.DefaultChannelStoreCap; i++ {
		require.NoError(t, s.AddChannel(ctx, fmt.Sprintf("cch_%d", i)))
	}
	require.Error(t, s.AddChannel(ctx, "cch_one_too_many"))
	require.NoError(t, s.AddChannel(ctx, "cch_a"), "a held ID is still a no-op at the cap")
}
