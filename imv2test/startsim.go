package imv2test

import (
	"testing"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/kithook"
	"github.com/xagentkit/imv2/sim"
)

// StartSim serves k, a Connector built with connector.New, on a loopback
// port and starts a simulated xAgent against it. It sets cfg.Connector to
// k's URL and, when cfg.APIKey is empty, cfg.APIKey to k's key. Both are
// closed with t.Cleanup, the simulator first. It is the end-to-end half of testing a
// kit Connector, beside RunKit's conformance checks:
//
//	agent := imv2test.StartSim(t, k, sim.Config{Rate: 50})
//	if err := agent.Reply(t.Context(), agent.ChannelID(), "Hello."); err != nil {
//		t.Fatal(err)
//	}
//	if err := agent.WaitAcked(t.Context(), 1); err != nil {
//		t.Fatal(err)
//	}
func StartSim(t testing.TB, k *connector.Connector, cfg sim.Config) *sim.Simulator {
	t.Helper()
	built, ok := kithook.Describe(k)
	if !ok {
		t.Fatal("imv2test: StartSim needs a Connector built with connector.New")
	}
	url, err := k.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	cfg.Connector = url
	if cfg.APIKey == "" {
		cfg.APIKey = built.APIKey
	}
	s, err := sim.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
