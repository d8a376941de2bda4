package cmdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// BuildAndRun is a TestMain body for tests that run a command as a user
// would: it builds the command in pkg (a directory, relative to the test's
// package) into a temporary directory — with -race when the tests run
// under -race (CI), so go test without it is not slowed down by a race
// build and a race-checked child doing the work — stores the binary's path
// in *bin, runs the tests, removes the build and, when the tests passed,
// fails the run on a leaked goroutine. It returns the exit code for os.Exit.
func BuildAndRun(m *testing.M, pkg, name string, bin *string) int {
	dir, err := os.MkdirTemp("", name+"-test")
	if err != nil {
		fmt.Fprintf(os.Stderr, "temporary directory: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, name)
	args := []string{"build", "-o", *bin, pkg}
	if raceEnabled {
		args = append(args[:1], append([]string{"-race"}, args[1:]...)...)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}
