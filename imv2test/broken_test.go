package imv2test_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/imv2test"
	bc "github.com/xagentkit/imv2/imv2test/internal/brokenconnector"
)

// brokenRun is one run of the suite against the broken fixture.
type brokenRun struct {
	name     string
	flaws    []bc.Flaw
	buffered bool
	apiKey   string
}

// flawFails maps each flaw to the checks it must fail. Every flaw breaks
// one rule the way real Connectors get it wrong; the checks listed are
// the ones about that rule.
var flawFails = map[bc.Flaw][]string{
	bc.ToolProfileUndeclared: {"K1.a"},
	bc.HealthMismatch:        {"K1.b"},
	bc.UploadsWithoutKey:     {"K1.c"},
	bc.DescriptorExtra:       {"K1.d"},
	bc.LenientHello:          {"K1.e", "K1.f"},
	bc.ExactVersion:          {"K1.f"},
	bc.FinalTwice:            {"K2.a", "K2.d", "K9.b", "K11.a"},
	bc.Placeholder:           {"K2.b"},
	bc.StitchGaps:            {"K2.c", "K6.c"},
	bc.NoDrafts:              {"K2.d", "K2.f"},
	bc.NoDedup:               {"K3.a", "K3.b", "K3.c", "K3.d", "K11.a"},
	bc.AckReplyToMessageID:   {"K4.a"},
	bc.AcceptUnknownFields:   {"K4.b", "K7.a", "K7.d"},
	bc.RejectUnknownMembers:  {"K7.d", "K7.e"},
	bc.NoRequestID:           {"K4.c"},
	bc.SilentInvalid:         {"K4.d"},
	bc.BufferTempText:        {"K5.a"},
	bc.UnboundedDeltas:       {"K6.a", "K6.b", "K6.c"},
	bc.LeakSessionID:         {"K7.b", "K7.c", "K8.a"},
	bc.UnsignedDownload:      {"K8.a"},
	bc.AcceptUnknownFile:     {"K8.b"},
	bc.DropFiles:             {"K8.c", "K9.b"},
	bc.LenientDelta:          {"K7.a", "K9.a"},
	bc.AckBeforePost:         {"K2.e", "K9.b"},
	bc.AcceptSync:            {"K10.a", "K10.b"},
	bc.NewIDOnReconnect:      {"K11.a", "K11.b"},
	bc.ResendHistory:         {"K11.b"},
	bc.ActivityUnsupported:   {"K12.a", "K12.b", "K12.d", "K12.e"},
	bc.IgnoreBadActivity:     {"K12.c"},
	bc.ActivityForever:       {"K12.d"},
	bc.StrictAckText:         {"K4.e"},
	bc.DeepFileNames:         {"K7.e"},
	bc.PlainToolName:         {"K12.e"},
	bc.FingerprintURL:        {"K3.d"},
	bc.DraftOvertakes:        {"K2.e"},
	bc.FirstDraftOvertakes:   {"K2.e", "K2.f"},
	bc.FinalsInArrivalOrder:  {"K2.f"},
	bc.EditOtherReply:        {"K2.f"},
	// Every check that needs a final accepted: the suite resends each one
	// with backoff and gives up when its bound is spent (A8, M12).
	bc.RejectRetryable: {"K2.a", "K2.b", "K2.c", "K2.d", "K2.e", "K2.f", "K3.a", "K3.b", "K3.c", "K4.a", "K4.c", "K4.d",
		"K3.d", "K6.c", "K7.b", "K7.d", "K7.e", "K8.b", "K8.c", "K9.b", "K10.a", "K11.a", "K12.b", "K12.c"},
}

// brokenRuns: the flawless fixture with a streaming and a buffering
// target, then the flaws in groups whose checks do not overlap, so each
// run fails exactly the union of its flaws' checks. (Grouping keeps the
// package fast: a full suite run is ~15 s of mostly waiting, and the race
// detector slows down sharply with dozens of runs side by side.)
var brokenRuns = []brokenRun{
	{name: "no-flaw"},
	{name: "no-flaw-buffered", buffered: true, apiKey: "fixture-key"},
	{name: "group-a", flaws: []bc.Flaw{bc.ToolProfileUndeclared, bc.Placeholder, bc.NoDedup, bc.AckReplyToMessageID,
		bc.UnboundedDeltas, bc.LeakSessionID, bc.DropFiles, bc.AcceptSync, bc.IgnoreBadActivity, bc.DeepFileNames,
		bc.FirstDraftOvertakes}},
	{name: "group-b", flaws: []bc.Flaw{bc.HealthMismatch, bc.StitchGaps, bc.AcceptUnknownFields, bc.UnsignedDownload,
		bc.AckBeforePost, bc.NewIDOnReconnect, bc.ActivityUnsupported, bc.StrictAckText, bc.FingerprintURL}},
	{name: "group-c", flaws: []bc.Flaw{bc.DescriptorExtra, bc.FinalTwice, bc.SilentInvalid, bc.NoRequestID,
		bc.AcceptUnknownFile, bc.LenientDelta, bc.ActivityForever, bc.PlainToolName, bc.EditOtherReply}},
	// It overlaps nearly every other flaw, so it runs alone.
	{name: "group-f", flaws: []bc.Flaw{bc.RejectRetryable}},
	{name: "group-d", flaws: []bc.Flaw{bc.LenientHello, bc.NoDrafts, bc.ResendHistory, bc.RejectUnknownMembers, bc.DraftOvertakes}},
	{name: "group-e-buffered", buffered: true, apiKey: "fixture-key", flaws: []bc.Flaw{bc.UploadsWithoutKey, bc.BufferTempText, bc.ExactVersion}},
	// Buffered temporary text shows a reply at its first delta, which
	// hides the order of finals: alone.
	{name: "group-g-buffered", buffered: true, apiKey: "fixture-key", flaws: []bc.Flaw{bc.FinalsInArrivalOrder}},
}

// want returns the checks a run must fail, sorted like a report, and
// fails the test when two of its flaws claim the same check.
func (r brokenRun) want(t *testing.T) []string {
	owner := map[string]bc.Flaw{}
	for _, f := range r.flaws {
		for _, c := range flawFails[f] {
			require.NotContains(t, owner, c, "%s: %s and %s both fail %s; put them in different groups", r.name, owner[c], f, c)
			owner[c] = f
		}
	}
	var out []string
	for c := range owner {
		out = append(out, c)
	}
	slices.SortFunc(out, compareCheckNames)
	return out
}

// compareCheckNames orders K2.a before K10.a, as reports do.
func compareCheckNames(a, b string) int {
	num := func(s string) int {
		n, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(s, "K"), ".", 2)[0])
		return n
	}
	if d := num(a) - num(b); d != 0 {
		return d
	}
	return strings.Compare(a, b)
}

// The fixture's bounds are small so the probes stay cheap (it caps 32
// open streams and 300 KiB), and its timeouts are short and declared so
// K6.c and K12.d observe them.
const (
	fixtureDeltaTTL    = 3 * time.Second
	fixtureActivityTTL = time.Second
)

var fixtureConfig = imv2test.Config{DeltaStreams: 100, DeltaBytes: 512 << 10, Wait: 3 * time.Second}

// startBroken builds the fixture of r, served in memory by the run; it
// is closed with t.Cleanup.
func startBroken(t *testing.T, r brokenRun) imv2test.Connector {
	rec := &imv2test.Recorder{}
	b, err := bc.New(bc.Config{
		Flaws: r.flaws, APIKey: r.apiKey, Buffered: r.buffered, Sink: rec.Record,
		DeltaIdleTTL: fixtureDeltaTTL, ActivityTimeout: fixtureActivityTTL,
	})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return imv2test.Connector{
		Handler: b.Handler(), APIKey: r.apiKey, Observer: rec, User: b, Buffered: r.buffered,
		DeltaIdleTTL: fixtureDeltaTTL, DeltaSweep: time.Millisecond, ActivityTimeout: fixtureActivityTTL,
	}
}

// TestBrokenConnector_K1_K12_EachFlawFailsItsChecks runs the whole suite
// against the broken fixture, flawless and with every flaw, all runs at
// once: each run fails exactly the checks of its flaws. The flawless
// fixture passes everything, with a streaming and a buffering target, so
// a failure is the flaw's and not the fixture's; and every check of the
// suite is failed by some flaw, so none passes whatever the Connector.
// The runs share one synctest bubble: every wait is on its fake clock.
func TestBrokenConnector_K1_K12_EachFlawFailsItsChecks(t *testing.T) {
	t.Parallel()
	used := map[bc.Flaw]bool{}
	for _, r := range brokenRuns {
		for _, f := range r.flaws {
			require.False(t, used[f], "flaw %s runs twice", f)
			used[f] = true
		}
	}
	for _, f := range bc.Flaws {
		require.True(t, used[f], "flaw %s never runs", f)
		require.NotEmpty(t, flawFails[f], "flaw %s fails no check", f)
	}
	reps := make([]*imv2test.Report, len(brokenRuns))
	errs := make([]error, len(brokenRuns))
	synctest.Test(t, func(t *testing.T) {
		var fs []func()
		for i, r := range brokenRuns {
			c := startBroken(t, r)
			fs = append(fs, func() {
				cfg := fixtureConfig
				reps[i], errs[i] = imv2test.CheckConnector(t.Context(), c, &cfg)
			})
		}
		concurrently(fs...)
	})
	all := map[string]bool{}
	for i, r := range brokenRuns {
		want := r.want(t)
		t.Run(r.name, func(t *testing.T) {
			require.NoError(t, errs[i])
			t.Logf("broken fixture, %s %v:\n%s", r.name, r.flaws, table(t, reps[i]))
			require.Equal(t, orEmpty(want), orEmpty(reps[i].Failed()))
		})
		for _, c := range want {
			all[c] = true
		}
	}
	// Every Connector-side check is proven to fail on some flaw.
	checks, err := imv2test.Checks(imv2test.SideConnector)
	require.NoError(t, err)
	for _, c := range checks {
		require.True(t, all[c.Name], "no flaw of the fixture fails %s", c.Name)
	}
}
