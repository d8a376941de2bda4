package storetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The suite starts goroutines in its Concurrent subtests and child
// processes for the mutants; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
