//go:build unix

package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/protocol"
)

const apiKey = "e2e-api-key"

// runningConnector is one Connector process: a Bridge behind an
// http.Server on a fixed loopback address, so a restart listens where
// xAgent reconnects.
type runningConnector struct {
	b   *xmppbridge.Bridge
	srv *http.Server
	err chan error
}

// startConnector runs the bridge as botJID for conversation, its state in
// stateDir ("" in memory), logging into logs when set.
func startConnector(t *testing.T, p *prosody, addr, conversation, stateDir string, logs *lines, opts ...func(*xmppbridge.Config)) *runningConnector {
	t.Helper()
	cfg := xmppbridge.Config{
		Build:  protocol.Build{Version: "e2e", BuildTime: "2612020000"},
		APIKey: apiKey, JID: botJID, Password: botPass, Server: p.c2s, TLS: p.tls(),
		Conversation: conversation, FileHosts: []string{p.http}, PrivateFileHosts: true, StateDir: stateDir,
		// Corrections at most every 50 ms, so a streamed reply shows a few.
		Display: connector.Display{Interval: 50 * time.Millisecond},
	}
	if logs == nil {
		logs = &lines{}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("connector log:\n%s", logs.buf.String())
			}
		})
	}
	{
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, o := range opts {
		o(&cfg)
	}
	b, err := xmppbridge.New(cfg)
	require.NoError(t, err)
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	rc := &runningConnector{b: b, srv: connector.NewServer(addr, b.Handler()), err: make(chan error, 1)}
	go func() { rc.err <- rc.srv.Serve(l) }()
	return rc
}

// stop is a crash as far as xAgent can tell: connections drop, nothing
// is acked any more; the state directory stays.
func (rc *runningConnector) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, rc.srv.Close())
	require.NoError(t, rc.b.Close())
	require.ErrorIs(t, <-rc.err, http.ErrServerClosed)
}

// lines collects log output.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func attachment(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func download(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return data
}
