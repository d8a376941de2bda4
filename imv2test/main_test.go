package imv2test_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// consoleBinary is the console example built with -race for this run.
var consoleBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "imv2test")
	if err != nil {
		panic(err)
	}
	consoleBinary = filepath.Join(dir, "console")
	if out, err := exec.Command("go", "build", "-race", "-o", consoleBinary, "../examples/console").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build console: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
