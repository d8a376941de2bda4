// Package pgtest gives tests a real PostgreSQL server: one it starts
// itself from the initdb and postgres binaries on PATH, in a temporary
// directory on a free loopback port, or an existing one named by the
// environment variable IMV2_PG_URL. Each test gets its own database, so
// tests run in parallel.
//
//	var srv *pgtest.Server
//
//	func TestMain(m *testing.M) {
//		os.Exit(pgtest.Main(m, &srv))
//	}
//
//	func TestX(t *testing.T) { url := srv.NewDatabase(t) ... }
//
// Run as root (CI), the server runs as an unprivileged user, since initdb
// and postgres refuse root: IMV2_PG_USER if set, else "postgres" or
// "nobody" if they exist, else a system user "imv2pg" made with useradd.
// The data directory and socket directory are chowned to that user.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names an existing server to use instead of starting one. Its
// user needs the CREATEDB privilege.
const EnvURL = "IMV2_PG_URL"

// EnvUser names the unprivileged user a root process runs the server as.
const EnvUser = "IMV2_PG_USER"

// Server is a PostgreSQL server for the tests of one test binary.
type Server struct {
	// URL connects to the server's maintenance database as a superuser
	// (or as the user of IMV2_PG_URL).
	URL string
	// Started is how long initdb and the server's start took; zero for
	// an existing server.
	Started time.Duration

	dir    string     // temporary directory; "" for an existing server
	cmd    *exec.Cmd  // the postmaster; nil for an existing server
	waited chan error // cmd.Wait's result
	logs   string     // the server's log file
	next   atomic.Int64

	// How run started the postmaster, for Resume.
	cred       *syscall.Credential
	data, sock string
	port       int
}

// Main starts the server (or connects to IMV2_PG_URL), stores it in *srv,
// runs the tests, stops the server and returns m.Run's exit code (1 when
// the server could not start or stop).
func Main(m *testing.M, srv **Server) int {
	s, err := Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	if s.Started > 0 {
		fmt.Fprintf(os.Stderr, "pgtest: PostgreSQL started in %v (initdb + postgres)\n", s.Started.Round(time.Millisecond))
	}
	*srv = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start returns the server of IMV2_PG_URL when it is set, else starts one.
func Start(ctx context.Context) (*Server, error) {
	if url := os.Getenv(EnvURL); url != "" {
		s := &Server{URL: url}
		return s, s.ping(ctx)
	}
	return startLocal(ctx)
}

// StartOwn starts a server of the caller's own, even when IMV2_PG_URL
// is set: a test that stops and restarts the database (Halt, Resume)
// must not take the shared one away from the others. Stop it when done.
func StartOwn(ctx context.Context) (*Server, error) {
	return startLocal(ctx)
}

// Halt stops a server StartOwn started, as an operator's
// "pg_ctl stop -m fast" does: every session is aborted and new
// connections are refused until Resume.
func (s *Server) Halt() error {
	if s.cmd == nil {
		return errors.New("pgtest: Halt of a server that is not running here")
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.waited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.waited
	}
	s.cmd = nil
	return nil
}

// Resume starts a halted server again on the same port and data, and
// returns once it answers.
func (s *Server) Resume(ctx context.Context) error {
	if s.cmd != nil || s.dir == "" {
		return errors.New("pgtest: Resume of a server that is not halted")
	}
	return s.run(ctx, s.cred, s.data, s.sock, s.port)
}

func startLocal(ctx context.Context) (*Server, error) {
	begin := time.Now()
	for _, bin := range []string{"initdb", "postgres"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not on PATH (install PostgreSQL 15, or set %s): %w", bin, EnvURL, err)
		}
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "imv2-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, logs: filepath.Join(dir, "postgres.log")}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fail(err)
		}
	}
	if cred != nil {
		for _, d := range []string{dir, data, sock} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return fail(fmt.Errorf("chown %s to the server's user: %w", d, err))
			}
		}
	}
	initdb := exec.CommandContext(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	s.prepare(initdb, cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %w\n%s", err, out))
	}
	// A free port can be taken between the probe and the server's bind:
	// try a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		if err := s.run(ctx, cred, data, sock, port); err != nil {
			if strings.Contains(err.Error(), "could not bind") || strings.Contains(err.Error(), "in use") {
				continue
			}
			return fail(err)
		}
		s.Started = time.Since(begin)
		return s, nil
	}
	return fail(errors.New("no free loopback port after 3 tries"))
}

// run starts the postmaster on port and waits until it answers.
func (s *Server) run(ctx context.Context, cred *syscall.Credential, data, sock string, port int) error {
	s.cred, s.data, s.sock, s.port = cred, data, sock, port
	logf, err := os.OpenFile(s.logs, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("postgres", "-D", data, "-p", strconv.Itoa(port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
		"-c", "shared_buffers=32MB", "-c", "max_locks_per_transaction=128")
	s.prepare(cmd, cred)
	// If the test binary dies without Stop (a panic, a -timeout), the
	// kernel stops the server too (SIGQUIT: immediate shutdown). Go sets
	// it after the credential change, which would otherwise clear it.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.cmd = cmd
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			s.cmd = nil
			log, _ := os.ReadFile(s.logs)
			return fmt.Errorf("postgres exited: %v\n%s", err, log)
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.ping(pctx)
		cancel()
		if err == nil {
			// Wait's goroutine keeps running; Stop collects it.
			s.waited = exited
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			s.cmd = nil
			return fmt.Errorf("postgres did not answer within 60s: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process, not a test assertion
	}
}

// prepare runs cmd in the temp dir as the server's user.
func (s *Server) prepare(cmd *exec.Cmd, cred *syscall.Credential) {
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred} // nil: the caller's user
}

func (s *Server) ping(ctx context.Context) error {
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// Stop stops a server Start started (fast shutdown by its PID, SIGKILL if
// it lingers) and removes its directory. For an existing server it does
// nothing.
func (s *Server) Stop() error {
	if s.cmd == nil {
		if s.dir != "" { // halted
			return os.RemoveAll(s.dir)
		}
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown: abort sessions, checkpoint
	select {
	case <-s.waited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.waited
	}
	s.cmd = nil
	return os.RemoveAll(s.dir)
}

// NewDatabase creates an empty database for t and returns its URL; it is
// dropped when t ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), s.next.Add(1))
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			t.Errorf("pgtest: connect: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return withDatabase(s.URL, name)
}

// withDatabase returns the connection string conn naming database name
// instead of its own: a later dbname overrides an earlier one, in a URL's
// query as in a keyword/value string.
func withDatabase(conn, name string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		if strings.Contains(conn, "?") {
			return conn + "&dbname=" + name
		}
		return conn + "?dbname=" + name
	}
	return conn + " dbname=" + name
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// credential returns the user to run the server as: nil when not root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	names := []string{"postgres", "nobody"}
	if n := os.Getenv(EnvUser); n != "" {
		names = []string{n}
	}
	for _, n := range names {
		if u, err := user.Lookup(n); err == nil {
			return toCredential(u)
		}
	}
	if os.Getenv(EnvUser) != "" {
		return nil, fmt.Errorf("%s=%s: no such user", EnvUser, names[0])
	}
	const made = "imv2pg"
	if u, err := user.Lookup(made); err == nil {
		return toCredential(u)
	}
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", made).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("running as root and no unprivileged user to run PostgreSQL as (set %s): useradd: %v\n%s", EnvUser, err, out)
	}
	u, err := user.Lookup(made)
	if err != nil {
		return nil, err
	}
	return toCredential(u)
}

func toCredential(u *user.User) (*syscall.Credential, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s is root; PostgreSQL refuses to run as root", u.Username)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}
