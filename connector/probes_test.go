package connector_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
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
// without the API key (which /health still needs). With no xAgent ever
// connected, /readyz is 200 (xAgent is the client). It turns 503 with the
// reason while the store refuses writes, and while the platform's reader
// fails, ready again when each recovers — each change seen once the
// verdict is ReadyInterval old —, and 503 "shutting down" at once when
// Shutdown begins; /livez stays 200 throughout.
func TestKit_Probes_ReadyzFollowsStoreAndPlatform(t *testing.T) {
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer bolt.Close()
	st := &failingStore{Store: bolt}
	p := &readyPlatform{pretend: newPretend(0)}
	clk := fakeclock.New(time.Unix(0, 0))
	k, url := startKit(t, p, "secret-key-for-tests-0123456789", connector.Options{Store: st, Advanced: connector.Advanced{Clock: clk}})
	next := func() { clk.Advance(connector.ReadyInterval) }

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
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code, "the verdict is reused for ReadyInterval")
	next()
	code, body := get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: store not writable", body)
	code, _ = get(t, url+"/livez")
	require.Equal(t, http.StatusOK, code, "alive while not ready")
	st.full.Store(false)
	next()
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code, "ready again once the store takes writes")

	p.down.Store(true)
	next()
	code, body = get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready: platform: room reader")
	p.down.Store(false)
	next()
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
// only when the kit has made no successful write within ReadyInterval:
// after a channel open registered its ID, probes write nothing (they wrote
// two each before). A kit write that fails makes the next verdict not
// ready without a probe, and it is ready again once the store takes the
// probe's write.
func TestKit_Probes_ReadyzReusesTheKitsRecentWrites(t *testing.T) {
	st := &probeCounting{failingStore: &failingStore{Store: connector.NewMemoryStore(nil)}}
	clk := fakeclock.New(time.Unix(0, 0))
	_, url := startKit(t, newPretend(0), "", connector.Options{Store: st, Advanced: connector.Advanced{Clock: clk}})
	code, _ := get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, int32(2), st.probes.Load(), "idle: the probe writes")
	clk.Advance(connector.ReadyInterval)

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
	// Its Register fails; OpenChannel retries a refusal until its context
	// ends, so give it one attempt's time.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = cli.OpenChannel(short, "")
	cancelShort()
	require.Error(t, err)
	st.full.Store(false) // the probe's write would pass: the kit's failure decides
	clk.Advance(connector.ReadyInterval)
	code, body := get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: store not writable", body)
	require.Equal(t, int32(2), st.probes.Load(), "a failed write of the kit's needs no probe")
	clk.Advance(connector.ReadyInterval)
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code, "ready again once the store takes the probe's write")
	require.Equal(t, int32(4), st.probes.Load())
}

// fullDisk is a store on a full disk as bbolt meets one: the kit's claims,
// records and pending writes need new pages and fail "no space left on
// device", while the probe's small registry write still fits.
type fullDisk struct {
	imv2.ClaimStore
	state.Store
	full atomic.Bool
}

func (s *fullDisk) Claim(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	if s.full.Load() {
		return imv2.Claim{}, errDiskFull
	}
	return s.ClaimStore.Claim(ctx, channelID, messageID, fp, owner, lease)
}

func (s *fullDisk) Add(ctx context.Context, e imv2.PendingEntry) error {
	if s.full.Load() {
		return errDiskFull
	}
	return s.Store.Add(ctx, e)
}

// Record, Lookup, Release, DropChannel and Handover exist on both
// embedded interfaces: the ClaimStore's are the store's.
func (s *fullDisk) Record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint) error {
	if s.full.Load() {
		return errDiskFull
	}
	return s.ClaimStore.Record(ctx, channelID, messageID, fp)
}

func (s *fullDisk) Lookup(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, bool, error) {
	return s.ClaimStore.Lookup(ctx, channelID, messageID)
}

func (s *fullDisk) DropChannel(ctx context.Context, channelID string) error {
	return s.ClaimStore.DropChannel(ctx, channelID)
}

func (s *fullDisk) Handover(ctx context.Context, from, to string) error {
	return s.ClaimStore.Handover(ctx, from, to)
}

// TestKit_Probes_FullDiskIsNotReady: on a full disk the kit's claims fail
// while the probe's small write passes; /readyz says "store not writable"
// once a final's claim failed (it said ready before: the probe decided
// alone), and ready again once the kit's writes pass.
func TestKit_Probes_FullDiskIsNotReady(t *testing.T) {
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer bolt.Close()
	st := &fullDisk{ClaimStore: bolt, Store: bolt}
	clk := fakeclock.New(time.Unix(0, 0))
	_, url := startKit(t, newPretend(0), "", connector.Options{Store: st, Advanced: connector.Advanced{Clock: clk}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := newAgent()
	client, ch := a.dial(t, url)
	defer client.Close()
	code, _ := get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code)

	st.full.Store(true)
	_, err = client.Send(ctx, ch, imv2.ChatMessage{Text: "no room for its claim"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // counted after the kit kept the failure
		series, _ := scrapeMetrics(t, url, "")
		return series[`imv2_store_errors_total{store="completed",op="claim"}`] > 0
	}, 10*time.Second, 10*time.Millisecond, "the final's claim failed")
	clk.Advance(connector.ReadyInterval)
	code, body := get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "the disk is full: %s", body)
	require.Equal(t, "not ready: store not writable", body)

	st.full.Store(false)
	clk.Advance(connector.ReadyInterval)
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code, "room again: ready")
}

// TestKit_Probes_ReadyzFloodWritesOneProbePerInterval (issue 37): 64
// unauthenticated connections calling /readyz over loopback make one
// probe write (a Register and a Forget) per ReadyInterval, however many
// requests they send; the verdict is shared.
func TestKit_Probes_ReadyzFloodWritesOneProbePerInterval(t *testing.T) {
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "kit.db"), boltstore.Options{})
	require.NoError(t, err)
	defer bolt.Close()
	st := &probeCounting{failingStore: &failingStore{Store: bolt}}
	clk := fakeclock.New(time.Unix(0, 0))
	_, url := startKit(t, newPretend(0), "", connector.Options{Store: st, Advanced: connector.Advanced{Clock: clk}})
	flood := func() int64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		until := time.Now().Add(500 * time.Millisecond)
		for range 64 {
			wg.Go(func() {
				c := &http.Client{Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				for time.Now().Before(until) {
					resp, err := c.Get(url + "/readyz")
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("status %d", resp.StatusCode)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return n.Load()
	}
	n := flood()
	require.Greater(t, n, int64(64), "a flood")
	require.Equal(t, int32(2), st.probes.Load(), "%d requests, one probe record", n)
	clk.Advance(connector.ReadyInterval)
	n = flood()
	require.Equal(t, int32(4), st.probes.Load(), "%d requests in the next interval, one more probe record", n)
}
