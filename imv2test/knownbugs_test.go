//go:build knownbugs

package imv2test_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/imv2test"
)

// TestKnownBug_P6_ClientAnswersNonProfilePackets fails today: profile §10
// has xAgent's virtual channel drop packets outside the negotiated
// profiles silently, with no error reply (REQUIREMENTS P6, X1), but
// dataplane.Client answers session.sync_message and history.snapshot
// with an error packet unsupported_packet (client.go, clientConn.dispatch).
// Run with: go test -tags knownbugs -run KnownBug ./imv2test/
func TestKnownBug_P6_ClientAnswersNonProfilePackets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := imv2test.CheckXAgent(ctx, sdkXAgent(), &imv2test.Config{Run: `^K10\.x\.b$`})
	require.NoError(t, err)
	r, _ := rep.Result("K10.x.b")
	require.Equal(t, imv2test.Pass, r.Status, r.Reason)
}
