package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/cmdflags"
)

// TestRun_W1_KeyFromEnvOrFile: imv2sim takes the API key from
// $XAGENT_API_KEY or -api-key-file (never only from -api-key, which ps
// shows): a run against a Connector with that key delivers its finals;
// -api-key with -api-key-file is refused.
func TestRun_W1_KeyFromEnvOrFile(t *testing.T) {
	const key = "imv2sim-key-from-env-0123456789"
	ctx := testCtx(t)
	p := newPlatform()
	k := plainKit(t, p, func() *connector.Options {
		return &connector.Options{APIKey: key, Pace: connector.Pace{MaxAttempts: 1}}
	})

	t.Setenv(cmdflags.KeyEnv, key)
	r := startRun("-connector", k.url(), "-send", "1", "-rate", "0", "-q")
	require.NoError(t, r.result(ctx, t), "the key from the environment: stderr:\n%s", r.errOut)

	t.Setenv(cmdflags.KeyEnv, "")
	file := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(file, []byte(key+"\n"), 0o600))
	r = startRun("-connector", k.url(), "-api-key-file", file, "-send", "1", "-rate", "0", "-q")
	require.NoError(t, r.result(ctx, t), "the key from a file: stderr:\n%s", r.errOut)
	require.Len(t, p.postsTo(connector.DefaultConversationKey), 2)

	r = startRun("-connector", k.url(), "-api-key-file", file, "-api-key", key, "-q")
	require.ErrorContains(t, r.result(ctx, t), "give one")
	r = startRun("conform", "-connector", k.url(), "-api-key-file", filepath.Join(t.TempDir(), "missing"))
	require.ErrorContains(t, r.result(ctx, t), "-api-key-file")
}
