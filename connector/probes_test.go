package connector_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/state"
)

// failingStore refuses writes to the channel registry while full is set,
// as a store on a full disk does.
type failingStore struct {
	state.Store
	full atomic.Bool
}

var errDiskFull = errors.New("write kit.db: no space left on device")

func (s *failingStore) Register(ctx context.Context, id string) error {
	if s.full.Load() {
		return errDiskFull
	}
	return s.Store.Register(ctx, id)
}

// readyPlatform is a Platform whose reader can fail (ReadyChecker).
type readyPlatform struct {
	*pretend
	down atomic.Bool
}

func (p *readyPlatform) Ready(context.Context) error {
	if p.down.Load() {
		return errors.New("room reader: dial tcp 127.0.0.1:8008: connection refused")
	}
	return nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestKit_Probes_ReadyzFollowsStoreAndPlatform: /livez and /readyz answer
// without the API key (which /health still needs). /readyz turns 503 with
// the reason while the store refuses writes, and while the platform's
// reader fails, ready again when each recovers, and 503 "shutting down"
// once Shutdown begins; /livez stays 200 throughout.
func TestKit_Probes_ReadyzFollowsStoreAndPlatform(t *testing.T) {
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer bolt.Close()
	st := &failingStore{Store: bolt}
	p := &readyPlatform{pretend: newPretend(0)}
	k, url := startKit(t, p, "secret-key-for-tests-0123456789", connector.Options{Store: st})

	_, memURL := startKit(t, newPretend(0), "", connector.Options{})
	code, _ := get(t, memURL+"/readyz")
	require.Equal(t, http.StatusOK, code, "the default in-memory store is writable")

	code, _ = get(t, url+"/health")
	require.Equal(t, http.StatusUnauthorized, code, "/health keeps its key")
	for _, path := range []string{"/livez", "/readyz"} {
		code, body := get(t, url+path)
		require.Equal(t, http.StatusOK, code, path)
		require.Contains(t, []string{"ok", "ready"}, body)
	}

	st.full.Store(true)
	code, body := get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: store not writable", body)
	code, _ = get(t, url+"/livez")
	require.Equal(t, http.StatusOK, code, "alive while not ready")
	st.full.Store(false)
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code, "ready again once the store takes writes")

	p.down.Store(true)
	code, body = get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready: platform: room reader")
	p.down.Store(false)
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code, "ready again once the reader recovers")

	_, err = k.Shutdown(context.Background())
	require.NoError(t, err)
	code, body = get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: shutting down", body)
}
