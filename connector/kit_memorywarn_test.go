package connector_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
)

// TestKit_S8_MemoryStateWarnsAtStart: a Connector with state in memory
// says at start, as a Warn, that a restart posts a resent final twice; one
// on a durable Store, or given NewMemoryStore on purpose, says nothing of
// it.
func TestKit_S8_MemoryStateWarnsAtStart(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	k, err := connector.New(kitCard(""), editOnly(make(chan string, 1)), &connector.Options{Logger: log})
	require.NoError(t, err)
	require.NoError(t, k.Close())
	out := logs.String()
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "Options.Store")
	require.Contains(t, out, "second time")

	var quiet syncBuffer
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	k, err = connector.New(kitCard(""), editOnly(make(chan string, 1)), &connector.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(&quiet, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	require.NoError(t, k.Close())
	require.False(t, strings.Contains(quiet.String(), "Options.Store"), "no warning with a durable Store: %s", quiet.String())

	// Memory state chosen explicitly: the caller warns its own way.
	k, err = connector.New(kitCard(""), editOnly(make(chan string, 1)), &connector.Options{
		Store: connector.NewMemoryStore(nil), Logger: slog.New(slog.NewTextHandler(&quiet, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	require.NoError(t, k.Close())
	require.False(t, strings.Contains(quiet.String(), "Options.Store"), "no warning with NewMemoryStore: %s", quiet.String())
}
