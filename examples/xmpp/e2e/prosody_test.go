//go:build unix

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Accounts every test server has.
const (
	domain    = "localhost"
	botJID    = "bot@localhost"
	botPass   = "bot-password"
	aliceJID  = "alice@localhost"
	alicePass = "alice-password"
	// mallory is another person: a room occupant who floods.
	malloryJID  = "mallory@localhost"
	malloryPass = "mallory-password"
	mucDomain   = "conference.localhost"
	uploadJID   = "upload.localhost"
)

// prosody is a Prosody server of the test's own, from the Debian package
// (prosody and prosodyctl on PATH): its config, data, TLS certificate and
// log in a temp directory, bound to 127.0.0.1 only, on free ports, run as
// an unprivileged user when the test runs as root, stopped by its PID.
type prosody struct {
	dir    string
	c2s    string // host:port of the client port
	http   string // host:port of the HTTP port (file uploads)
	roots  *x509.CertPool
	conf   string
	cred   *syscall.Credential
	cmd    *exec.Cmd
	exited chan error
}

// startProsody starts a server with the accounts botJID and aliceJID, a
// MUC service (mucDomain, rooms archived: XEP-0359 stanza IDs) and an
// XEP-0363 upload service (uploadJID); t's cleanup stops it.
func startProsody(t *testing.T) *prosody {
	t.Helper()
	for _, bin := range []string{"prosody", "prosodyctl"} {
		_, err := exec.LookPath(bin)
		require.NoError(t, err, "%s not on PATH: apt-get install -y prosody (.ci/run does)", bin)
	}
	cred := credential(t)
	dir, err := os.MkdirTemp("", "imv2-prosody-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if log, _ := os.ReadFile(filepath.Join(dir, "prosody.log")); t.Failed() {
			t.Logf("prosody log:\n%s", log)
		}
		_ = os.RemoveAll(dir)
	})
	p := &prosody{dir: dir, c2s: freeAddr(t), http: freeAddr(t)}
	p.roots = writeCert(t, dir)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "data"), 0o700))
	_, c2sPort, _ := net.SplitHostPort(p.c2s)
	_, httpPort, _ := net.SplitHostPort(p.http)
	cfg := fmt.Sprintf(`-- Written by the e2e test: loopback only, no s2s.
pidfile = %[1]q
data_path = %[2]q
certificates = %[3]q
log = { info = %[4]q }
interfaces = { "127.0.0.1" }
local_interfaces = { "127.0.0.1" }
c2s_ports = { %[5]s }
c2s_direct_tls_ports = {}
legacy_ssl_ports = {}
s2s_ports = {}
component_ports = {}
http_ports = { %[6]s }
http_interfaces = { "127.0.0.1" }
https_ports = {}
https_interfaces = {}
http_external_url = "http://127.0.0.1:%[6]s/"
http_default_host = %[11]q
modules_enabled = { "roster", "saslauth", "tls", "disco", "ping", "mam", "carbons", "offline", "http" }
modules_disabled = { "s2s" }
authentication = "internal_hashed"
storage = "internal"
c2s_require_encryption = true
archive_expires_after = "1d"
ssl = { certificate = %[7]q, key = %[8]q }
VirtualHost %[9]q
Component %[10]q "muc"
	modules_enabled = { "muc_mam" }
	muc_room_locking = false
Component %[11]q "http_file_share"
	http_file_share_size_limit = 1048576
`, filepath.Join(dir, "prosody.pid"), filepath.Join(dir, "data"), dir, filepath.Join(dir, "prosody.log"),
		c2sPort, httpPort, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), domain, mucDomain, uploadJID)
	conf := filepath.Join(dir, "prosody.cfg.lua")
	require.NoError(t, os.WriteFile(conf, []byte(cfg), 0o600))
	if cred != nil {
		require.NoError(t, filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(path, int(cred.Uid), int(cred.Gid))
		}))
	}
	for _, acc := range [][2]string{{"bot", botPass}, {"alice", alicePass}, {"mallory", malloryPass}} {
		reg := exec.Command("prosodyctl", "--config", conf, "register", acc[0], domain, acc[1])
		p.prepare(reg, cred)
		out, err := reg.CombinedOutput()
		require.NoError(t, err, "prosodyctl register %s: %s", acc[0], out)
	}
	p.conf, p.cred = conf, cred
	p.start(t)
	t.Cleanup(p.stop)
	return p
}

// start runs the server and waits until it listens.
func (p *prosody) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command("prosody", "-F", "--config", p.conf)
	p.prepare(p.cmd, p.cred)
	// If the test binary dies without its cleanup, the kernel stops the
	// server too. Go sets it after the credential change.
	p.cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	out, err := os.OpenFile(filepath.Join(p.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer out.Close()
	p.cmd.Stdout, p.cmd.Stderr = out, out
	require.NoError(t, p.cmd.Start())
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{p.c2s, p.http} {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			select {
			case err := <-p.exited:
				log, _ := os.ReadFile(filepath.Join(p.dir, "prosody.log"))
				t.Fatalf("prosody exited: %v\n%s", err, log)
			default:
			}
			require.True(t, time.Now().Before(deadline), "prosody does not listen on %s: %v", addr, err)
			time.Sleep(20 * time.Millisecond) // polling a starting process, not a test assertion
		}
	}
}

// tls is the client TLS config that trusts the server's certificate.
func (p *prosody) tls() *tls.Config {
	return &tls.Config{RootCAs: p.roots, ServerName: domain, MinVersion: tls.VersionTLS12}
}

// prepare runs cmd in the server's directory as its user.
func (p *prosody) prepare(cmd *exec.Cmd, cred *syscall.Credential) {
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred} // nil: the caller's user
}

// stop stops the server by its PID (SIGTERM, SIGKILL if it lingers); its
// data stays for a start again.
func (p *prosody) stop() {
	if p.cmd == nil {
		return
	}
	defer func() { p.cmd = nil }()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// writeCert writes a self-signed certificate for the server's hosts into
// dir and returns a pool that trusts it.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: domain},
		DNSNames:  []string{domain, mucDomain, uploadJID},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// credential is the user the server runs as: nil when the test is not
// root; as root, the package's own "prosody" user, else "nobody".
func credential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range []string{"prosody", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		}
	}
	t.Fatal("running as root and neither a prosody nor a nobody user to run Prosody as")
	return nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
