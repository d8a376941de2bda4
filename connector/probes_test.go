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
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
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

// probeCounting counts the writes /readyz makes to prove the store
// writable (its probe channel's Register and Forget); while full, the
// registry and binding writes fail, as on a full disk.
type probeCounting struct {
	*failingStore
	probes atomic.Int32
}

func (s *probeCounting) Register(ctx context.Context, id string) error {
	if id == "readyz-probe" {
		s.probes.Add(1)
	}
	return s.failingStore.Register(ctx, id)
}

func (s *probeCounting) Forget(ctx context.Context, id string) error {
	if id == "readyz-probe" {
		s.probes.Add(1)
	}
	if s.full.Load() {
		return errDiskFull
	}
	return s.failingStore.Forget(ctx, id)
}

func (s *probeCounting) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	if s.full.Load() {
		return state.BindingChange{}, errDiskFull
	}
	return s.failingStore.Bind(ctx, b)
}

// TestKit_Probes_ReadyzReusesTheKitsRecentWrites: /readyz writes a probe
// only when the kit has made no successful write lately: after a channel
// open registered its ID, five probes write nothing (they wrote two each
// before). A write that fails sends the next probe to the store again,
// which turns not ready while it refuses, and ready once it recovers.
func TestKit_Probes_ReadyzReusesTheKitsRecentWrites(t *testing.T) {
	st := &probeCounting{failingStore: &failingStore{Store: connector.NewMemoryStore(nil)}}
	_, url := startKit(t, newPretend(0), "", connector.Options{Store: st})
	code, _ := get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, int32(2), st.probes.Load(), "idle: the probe writes")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: inbound(make(chan imv2.ChatMessage, 1))})
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.OpenChannel(ctx, "") // registers its ID: a write that succeeded
	require.NoError(t, err)
	for range 5 {
		code, _ := get(t, url+"/readyz")
		require.Equal(t, http.StatusOK, code)
	}
	require.Equal(t, int32(2), st.probes.Load(), "a recent write of the kit's proves the store writable")

	st.full.Store(true)
	_, err = cli.OpenChannel(ctx, "") // its Register fails
	require.Error(t, err)
	code, body := get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: store not writable", body)
	st.full.Store(false)
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code, "ready again once the store takes writes")
}
