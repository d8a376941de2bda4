package imv2test_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/imv2test"
)

// ruleFamilies are the families of RULES.md the suite must cover, with
// their highest rule number and the numbers RULES.md does not use.
var ruleFamilies = []struct {
	family string
	n      int
	absent []int
}{
	{"P", 8, nil}, {"I", 4, nil}, {"E", 5, []int{4}}, {"M", 14, nil}, {"D", 12, nil}, {"A", 8, nil},
	{"C", 8, nil}, {"S", 10, nil}, {"X", 5, nil}, {"W", 12, nil}, {"H", 5, nil}, {"T", 4, nil},
}

// TestCoverage_K1_K12_EveryRuleCheckedOrExplained: every rule of families
// P I E M D A C S X W H T is exercised by a check of either side, or is in
// the not-observable list with its reason — never both, never neither;
// and the twelve questions K1–K12 each name at least one check.
func TestCoverage_K1_K12_EveryRuleCheckedOrExplained(t *testing.T) {
	covered := map[string][]string{}
	for _, side := range []imv2test.Side{imv2test.SideConnector, imv2test.SideXAgent} {
		checks, err := imv2test.Checks(side)
		require.NoError(t, err)
		for _, c := range checks {
			for _, r := range c.Rules {
				covered[r] = append(covered[r], c.Name)
			}
		}
	}
	unobserved := map[string]bool{}
	for _, u := range imv2test.NotObservable() {
		require.NotEmpty(t, u.Why, u.Rule)
		unobserved[u.Rule] = true
	}
	for _, f := range ruleFamilies {
		for i := 1; i <= f.n; i++ {
			if slices.Contains(f.absent, i) {
				continue
			}
			id := fmt.Sprintf("%s%d", f.family, i)
			switch {
			case len(covered[id]) > 0 && unobserved[id]:
				t.Errorf("%s is covered by %v and listed as not observable", id, covered[id])
			case len(covered[id]) == 0 && !unobserved[id]:
				t.Errorf("%s is neither covered by a check nor listed as not observable", id)
			}
		}
	}
	for k := 1; k <= 12; k++ {
		require.NotEmpty(t, covered[fmt.Sprintf("K%d", k)], "K%d has no check", k)
	}
}

// TestChecks_ParseErrors: the script loader refuses what it cannot run.
func TestChecks_ParseErrors(t *testing.T) {
	for name, src := range map[string]string{
		"no title":     "-- K1.a --\nrules P1\ncard\n",
		"no rules":     "-- K1.a --\ntitle t\ncard\n",
		"unknown verb": "-- K1.a --\ntitle t\nrules P1\nfrobnicate\n",
		"bad name":     "-- K13.a --\ntitle t\nrules P1\ncard\n",
		"unknown need": "-- K1.a --\ntitle t\nrules P1\nneeds magic\ncard\n",
		"no commands":  "-- K1.a --\ntitle t\nrules P1\n",
		"xagent verb":  "-- K1.a --\ntitle t\nrules P1\nuser hi\n",
	} {
		t.Run(name, func(t *testing.T) {
			side := imv2test.SideConnector
			if name == "xagent verb" {
				side = imv2test.SideXAgent
			}
			_, err := imv2test.ParseChecks("x.txtar", []byte(src), side)
			require.Error(t, err)
		})
	}
}
