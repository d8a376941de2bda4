//go:build unix

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The homeserver the integration test runs: Dendrite, installed with
// `go install` into a cache folder on first use and reused afterwards.
const (
	dendriteModule  = "github.com/matrix-org/dendrite"
	dendriteVersion = "v0.13.8"
	// installTimeout bounds the one cold build of Dendrite: about 1.5 min
	// on 2 idle cores (cgo SQLite included), generously more on a loaded
	// machine. CI can run the same install as a cached step before the
	// tests (see installCommand); the test then only checks the binaries.
	installTimeout = 8 * time.Minute
)

var dendriteTools = []string{"dendrite", "generate-keys", "generate-config", "create-account"}

// dendriteDir is where the binaries live: $IMV2_DENDRITE_DIR, else
// <user cache dir>/imv2-dendrite/<version> ($HOME/.cache/… on Linux).
func dendriteDir() string {
	if d := os.Getenv("IMV2_DENDRITE_DIR"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "imv2-dendrite", dendriteVersion)
}

// installCommand is the exact command ensureDendrite runs.
func installCommand() []string {
	args := []string{"install"}
	for _, t := range dendriteTools {
		args = append(args, dendriteModule+"/cmd/"+t+"@"+dendriteVersion)
	}
	return args
}

var (
	installOnce sync.Once
	installErr  error
)

// ensureDendrite returns the folder holding the Dendrite binaries,
// building them with `go install` when one is missing. A file lock keeps
// two test processes from building at once.
func ensureDendrite(t *testing.T) string {
	t.Helper()
	dir := dendriteDir()
	installOnce.Do(func() { installErr = install(dir) })
	if installErr != nil {
		t.Fatalf("dendrite %s: %v", dendriteVersion, installErr)
	}
	return dir
}

func haveTools(dir string) bool {
	for _, name := range dendriteTools {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func install(dir string) error {
	if haveTools(dir) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if haveTools(dir) { // built by another process meanwhile
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		goBin, err = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err != nil {
		return fmt.Errorf("no go command to build Dendrite with: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, installCommand()...)
	cmd.Dir = os.TempDir() // outside any module: a plain module install
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=1", "GOFLAGS=-buildvcs=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("GOBIN=%s go %s: %v\n%s", dir, strings.Join(installCommand(), " "), err, out.String())
	}
	fmt.Fprintf(os.Stderr, "e2e: built Dendrite %s into %s in %s\n", dendriteVersion, dir, time.Since(start).Round(time.Second))
	return nil
}

// dendrite is one running homeserver on loopback.
type dendrite struct {
	t      *testing.T
	bin    string
	dir    string
	config string
	URL    string
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
}

// startDendrite runs a fresh homeserver: keys and config under a temp dir,
// SQLite, federation disabled, on a free loopback port. It is stopped (by
// its PID) when the test ends.
func startDendrite(t *testing.T) *dendrite {
	t.Helper()
	bin := ensureDendrite(t)
	dir := t.TempDir()
	d := &dendrite{t: t, bin: bin, dir: dir, config: filepath.Join(dir, "dendrite.yaml")}
	d.run(filepath.Join(bin, "generate-keys"), "--private-key", filepath.Join(dir, "matrix_key.pem"))
	cfg := d.run(filepath.Join(bin, "generate-config"), "-ci", "-dir", dir)
	cfg = mustReplace(t, cfg, "disable_federation: false", "disable_federation: true")
	cfg = mustReplace(t, cfg, "private_key: matrix_key.pem", "private_key: "+filepath.Join(dir, "matrix_key.pem"))
	cfg = mustReplace(t, cfg, "level: trace", "level: warn")
	if err := os.WriteFile(d.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	d.URL = "http://" + addr
	var err error
	if d.log, err = os.Create(filepath.Join(dir, "dendrite.log")); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(filepath.Join(bin, "dendrite"),
		"-config", d.config, "-http-bind-address", addr, "-really-enable-open-registration")
	d.cmd.Dir = dir
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.stop)
	d.waitUp()
	return d
}

func (d *dendrite) run(name string, args ...string) string {
	d.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = d.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		d.t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, stderr.String())
	}
	return string(out)
}

func mustReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("generated config has no %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// waitUp polls /_matrix/client/versions until it answers (network, not a
// timer of the SDK), or fails with the log when the process died.
func (d *dendrite) waitUp() {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		select {
		case <-d.exited:
			d.t.Fatalf("dendrite exited at start:\n%s", d.logTail())
		default:
		}
		resp, err := client.Get(d.URL + "/_matrix/client/versions")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("dendrite did not answer within 30s:\n%s", d.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var tokenRE = regexp.MustCompile(`AccessToken: ([^)\s]+)`)

// createUser registers a user with Dendrite's create-account (shared-secret
// registration against the running server) and returns its access token.
func (d *dendrite) createUser(name, password string) (userID, token string) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(d.bin, "create-account"),
		"-config", d.config, "-url", d.URL, "-username", name, "-password", password)
	cmd.Dir = d.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		d.t.Fatalf("create-account %s: %v\n%s", name, err, out)
	}
	m := tokenRE.FindSubmatch(out)
	if m == nil {
		d.t.Fatalf("create-account %s printed no access token:\n%s", name, out)
	}
	return "@" + name + ":localhost", string(m[1])
}

// stop ends the server by its PID: SIGTERM, then SIGKILL after 10 s.
func (d *dendrite) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	if d.t.Failed() {
		d.t.Logf("dendrite log:\n%s", d.logTail())
	}
	_ = d.log.Close()
}

func (d *dendrite) logTail() string {
	data, err := os.ReadFile(d.log.Name())
	if err != nil {
		return err.Error()
	}
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	return string(data)
}
