// Package cmdtest runs a command's main function the way a user runs the
// command, for tests of its command line (-h prints usage and exits 0).
//
// A test calls Main, which re-executes the test binary so that the child
// runs only that test, and the child then runs main with the given
// arguments in place of os.Args. The exit status and output are the real
// command's: flag.ExitOnError, os.Exit and log.Fatal behave as they do for
// a user.
package cmdtest

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// childEnv names the test a child process is to turn into the command.
const childEnv = "IMV2_CMDTEST_MAIN"

// hangLimit bounds a command that ignores its arguments and keeps running
// (a -h that starts the server); it is a guard, not a measured time.
const hangLimit = 30 * time.Second

// Main returns a command that runs main with args in a child copy of the
// test binary. In that child, Main itself runs main as the command named
// name and exits 0 when main returns, as a Go program does; so Main must
// be called before the test does anything else.
func Main(t *testing.T, name string, main func(), args ...string) *exec.Cmd {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		os.Args = append([]string{name}, args...)
		main()
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	return cmd
}

// CheckHelp runs cmd (a command given -h) and fails the test unless it
// exits 0, its output (stdout and stderr) holds every string in wants, and
// it does not report -h as an error (the flag package's "help requested").
func CheckHelp(t *testing.T, cmd *exec.Cmd, wants ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Env, c.Dir = cmd.Env, cmd.Dir
	c.WaitDelay = 5 * time.Second // a grandchild left holding the output pipe
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s did not exit within %v (it ignored -h?):\n%s", cmd, hangLimit, out)
	}
	if err != nil {
		t.Errorf("%s: %v, want exit status 0\n%s", cmd, err, out)
	}
	for _, want := range wants {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s printed no %q:\n%s", cmd, want, out)
		}
	}
	if strings.Contains(string(out), flag.ErrHelp.Error()) {
		t.Errorf("%s reported -h as an error:\n%s", cmd, out)
	}
}
