//go:build unix

package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"maunium.net/go/mautrix/id"
)

// lockedBuffer is a bytes.Buffer a test reads while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestConnector_ImV2SimBindsTheRoom runs the imv2sim command as an
// operator would: -auth with the sign-in form's fields binds the Matrix
// room through auth.start, and a room message is then answered in the
// room; SIGTERM ends it with status 0.
func TestConnector_ImV2SimBindsTheRoom(t *testing.T) {
	w := newWorld(t)
	addr := freeAddr(t)
	conn := startConnector(t, addr, "")
	defer conn.stop(t)
	bin := filepath.Join(t.TempDir(), "imv2sim")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/xagentkit/imv2/cmd/imv2sim").CombinedOutput()
	require.NoError(t, err, "%s", out)

	args := []string{"-connector", "http://" + addr, "-api-key", apiKey, "-rate", "0"}
	form := w.form()
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-auth", k+"="+form[k])
	}
	var stdout, stderr lockedBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		require.NoError(t, <-exited, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}()

	w.alice.waitFor("imv2sim signed in", func() bool { return strings.Contains(stdout.String(), ": authenticated") })
	bot := id.UserID(w.botID)
	w.alice.say("ping from the room")
	w.alice.waitFor("the reply", func() bool {
		originals, edits := split(w.alice.messagesFrom(bot))
		return len(originals) > 0 && lastShown(append(originals[:1:1], edits...)) == "You said: ping from the room"
	})
}
