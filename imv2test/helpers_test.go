package imv2test_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/imv2test"
)

// concurrently runs every f at once and waits. The suites these tests
// run mostly wait on timers and sockets, so running them side by side
// keeps the package fast even where go test allows only GOMAXPROCS
// parallel tests (2 in CI).
func concurrently(fs ...func()) {
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	wg.Wait()
}

// table renders a report for the test log.
func table(t *testing.T, rep *imv2test.Report) string {
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	return b.String()
}

// orEmpty makes nil and empty lists compare equal.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
