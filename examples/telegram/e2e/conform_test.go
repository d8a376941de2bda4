//go:build unix

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/imv2test"
)

// TestConform_K1_K12_OverTheEmulator runs the profile's conformance suite
// in process (imv2test.RunKit) against the Telegram Connector in edit
// mode (the mode the emulator gets: it has no sendMessageDraft) and in
// buffer mode, every channel bound to one chat of the emulator: every
// draft, edit and final the suite sees went to telegram-test-api and was
// accepted there, at Telegram's pace.
func TestConform_K1_K12_OverTheEmulator(t *testing.T) {
	for name, mode := range map[string]connector.Mode{"edit": connector.ModeAuto, "buffer": connector.ModeBuffer} {
		t.Run(name, func(t *testing.T) {
			em := startEmulator(t)
			logs := &lines{}
			b, err := tgbridge.New(tgbridge.Config{Build: buildForTest, APIKey: apiKey, Token: botapitest.Token, Server: em.API,
				Chat: "7", Mode: mode, PollTimeout: time.Second, Logger: logger(t, logs),
				Channel: imv2.Options{DeltaIdleTTL: time.Second, DeltaSweep: 100 * time.Millisecond, ActivityTimeout: time.Second}})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, b.Close()) })
			rep := imv2test.RunKit(t, b.Connector(), nil)
			require.True(t, rep.OK(), "failed: %v", rep.Failed())
			require.GreaterOrEqual(t, len(rep.Results)-len(rep.Skipped()), 20, "checks that ran")
			require.NotEmpty(t, em.callsTo(7), "the suite's replies went to the emulator")
		})
	}
}
