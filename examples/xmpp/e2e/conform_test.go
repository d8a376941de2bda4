//go:build unix

package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/imv2test"
)

// TestConform_K1_K12_OverProsody runs the profile's conformance suite
// (imv2sim conform) against the XMPP Connector in edit and in buffer
// mode, with a real Prosody behind it: every final the suite sends is
// posted to alice. The suite reports the checks that need an observer of
// the chat as skipped (the end-to-end tests observe alice's client
// instead). It found that a stanza larger than the server takes closes
// the bot's session (K6.b's 256 KiB draft, then K8.b timed out): the
// bridge now refuses it (Config.MaxStanzaBytes).
func TestConform_K1_K12_OverProsody(t *testing.T) {
	for name, mode := range map[string]connector.Mode{"edit": connector.ModeEdit, "buffer": connector.ModeBuffer} {
		t.Run(name, func(t *testing.T) {
			p := startProsody(t)
			newUser(t, p)
			addr := freeAddr(t)
			conn := startConnector(t, p, addr, aliceJID, t.TempDir(), nil, func(c *xmppbridge.Config) { c.Mode = mode })
			defer conn.stop(t)
			c := imv2test.Connector{URL: "http://" + addr, APIKey: apiKey, Buffered: mode == connector.ModeBuffer}
			rep, err := imv2test.CheckConnector(ctxFor(t), c, nil)
			require.NoError(t, err)
			var table strings.Builder
			require.NoError(t, rep.WriteTable(&table))
			t.Logf("conformance (%s), %d checks, %d skipped:\n%s", name, len(rep.Results), len(rep.Skipped()), table.String())
			require.True(t, rep.OK(), "failed: %v", rep.Failed())
			require.GreaterOrEqual(t, len(rep.Results)-len(rep.Skipped()), 20, "checks that ran")
		})
	}
}
