package imv2test_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/imv2test"
)

// The table shows a failure's whole reason, on one line: a reason is the
// one thing an author reads to fix the Connector.
func TestReport_WriteTableKeepsTheWholeReason(t *testing.T) {
	reason := "expect (line 9): chat.message.ack message_id=m1 status=rejected code=target_delivery_failed\n" +
		"retryable=true reply_to=p1: payload.status is \"rejected\", want \"accepted\"; " + strings.Repeat("and more ", 30) + "THE END"
	rep := &imv2test.Report{Side: imv2test.SideConnector, Results: []imv2test.Result{
		{Check: "K3.a", Rules: []string{"K3", "M9"}, Status: imv2test.Fail, Reason: reason},
	}}
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 3, "header, one row, summary")
	require.Contains(t, lines[1], strings.Join(strings.Fields(reason), " "))
	require.True(t, strings.HasSuffix(lines[1], "THE END"))
}
