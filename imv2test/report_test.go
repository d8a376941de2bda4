package imv2test_test

import (
	"bytes"
	"os"
	"os/exec"
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

// ReportTo makes a skipped check a skipped subtest with its reason, so
// go test -v shows SKIP, not PASS: the test re-runs itself as a child
// and reads the child's -v output.
func TestReportTo_SkippedCheckShowsAsSKIP(t *testing.T) {
	if os.Getenv("IMV2TEST_REPORTTO_CHILD") == "1" {
		imv2test.ReportTo(t, &imv2test.Report{Side: imv2test.SideConnector, Results: []imv2test.Result{
			{Check: "K6.c", Status: imv2test.Skip, Reason: "the bound is too long"},
			{Check: "K1.a", Status: imv2test.Pass},
		}})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReportTo_SkippedCheckShowsAsSKIP$", "-test.v")
	cmd.Env = append(os.Environ(), "IMV2TEST_REPORTTO_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- SKIP: TestReportTo_SkippedCheckShowsAsSKIP/K6.c")
	require.Contains(t, string(out), "the bound is too long")
	require.Contains(t, string(out), "--- PASS: TestReportTo_SkippedCheckShowsAsSKIP/K1.a")
}
