package pgstore_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/xagentkit/imv2/internal/toolreplaytest"
	"github.com/xagentkit/imv2/pgstore/internal/pgtest"
)

// srv is the PostgreSQL server of this test binary, started once.
var srv *pgtest.Server

func TestMain(m *testing.M) {
	if os.Getenv(envBenchReplica) != "" {
		os.Exit(benchReplicaMain()) // a BenchmarkReplicas replica
	}
	if os.Getenv(envReplica) != "" {
		os.Exit(replicaMain()) // a failover test's Connector replica
	}
	toolreplaytest.ChildMain(serveToolChild) // TestToolReplay_W13_RunsOnceAcrossASIGKILL's child
	if os.Getenv(envXAgentDB) != "" {
		os.Exit(xagentChildMain()) // TestXAgentRestart_S1_S10_W11_PendingFinalsOutliveTheProcess's child
	}
	if os.Getenv(envKillDB) != "" {
		os.Exit(killChildMain()) // TestGroupCommit_S8_KillMidBatch's child
	}
	code := pgtest.Main(m, &srv)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
