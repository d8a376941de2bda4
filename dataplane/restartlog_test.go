package dataplane

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// logBuffer is a bytes.Buffer the server's goroutines may log to.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServer_W4_RestartHelloNotLoggedAsAlarm: xAgent's first hello after
// a Connector restart names a connector_id the new process never issued;
// a new one is issued (W4) and that is normal, so nothing is logged at
// Info or above, and the Debug line names both IDs with the one attribute
// name the wire uses.
func TestServer_W4_RestartHelloNotLoggedAsAlarm(t *testing.T) {
	var info, debug logBuffer
	_, url := startServer(t, func(c *ServerConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&info, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	p := dialPeer(t, url, nil)
	id := p.hello("conn_from_before_a_restart")
	require.NotEqual(t, "conn_from_before_a_restart", id)
	require.Empty(t, info.String(), "a restart's first hello logged at Info or above")

	_, url = startServer(t, func(c *ServerConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	p = dialPeer(t, url, nil)
	id = p.hello("conn_from_before_a_restart")
	require.Contains(t, debug.String(), "old_connector_id=")
	require.Contains(t, debug.String(), "connector_id="+id)
}
