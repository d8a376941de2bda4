package connector_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
)

// countingReserver counts the reservations a store granted and refused.
type countingReserver struct {
	connector.Reserver
	granted, refused atomic.Int32
}

func (c *countingReserver) Reserve(ctx context.Context, ch string, n int64) (connector.Reservation, error) {
	r, err := c.Reserver.Reserve(ctx, ch, n)
	if err != nil {
		c.refused.Add(1)
	} else {
		c.granted.Add(1)
	}
	return r, err
}

// uploadPeers is the set-up of the attacks between peers: a kit on a
// counting memory file store at url, and two xAgents on it with
// connector_ids of their own; ctx bounds the test (30 s).
func uploadPeers(t *testing.T) (store *countingReserver, url string, ctx context.Context, attacker, victim *dataplane.Client) {
	t.Helper()
	store = &countingReserver{Reserver: connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})}
	_, url = startKit(t, newPretend(0), "", connector.Options{Files: store})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	dial := func() *dataplane.Client {
		cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: inbound(make(chan imv2.ChatMessage, 16))})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	attacker, victim = dial(), dial()
	require.NotEqual(t, attacker.ConnectorID(), victim.ConnectorID())
	return store, url, ctx, attacker, victim
}

// TestAttack_OnePeersSlowUploadsLeaveAnothersRoom (issue 37): one
// connector_id opens 8 channels and starts a chunked upload on each at
// 120 KB/s (each reserving the largest file, 32 MiB, of the 256 MiB
// store); another connector_id then uploads 14 files of 1 KB. All 14 are
// stored: each connector_id is guaranteed a floor of the upload room and
// what peers hold beyond their floors takes at most three quarters of it,
// so the first holds at most 5 × 32 MiB. Before, it reserved 7 × 32 MiB
// (the whole upload share) and the other's uploads got file_store_full, 0
// of 14.
func TestAttack_OnePeersSlowUploadsLeaveAnothersRoom(t *testing.T) {
	store, url, ctx, attacker, victim := uploadPeers(t)
	addr := strings.TrimPrefix(url, "http://")
	answers := make(chan int, 8)
	upCtx, stop := context.WithCancel(ctx)
	defer stop()
	for range 8 {
		ch, err := attacker.OpenChannel(ctx, "")
		require.NoError(t, err)
		// Chunked, so the server reserves the largest file; 4 KB every
		// 33 ms: 120 KB/s.
		rawUpload{channel: ch, piece: 4 << 10, every: 33 * time.Millisecond}.start(upCtx, t, addr, answers)
	}
	require.Eventually(t, func() bool { return store.granted.Load()+store.refused.Load() == 8 }, 10*time.Second, 5*time.Millisecond)
	held := store.granted.Load()
	t.Logf("the attacker holds %d reservations of 32 MiB (%d refused)", held, store.refused.Load())
	assert.LessOrEqual(t, held, int32(5), "one peer holds at most its floor and the pool beyond floors")

	vch, err := victim.OpenChannel(ctx, "")
	require.NoError(t, err)
	stored := 0
	for range 14 {
		st, body := kitUploadBytes(t, url, vch, bytes.Repeat([]byte{'v'}, 1<<10))
		if st == http.StatusOK {
			stored++
		} else {
			t.Logf("victim upload: %d %s", st, body)
		}
	}
	t.Logf("the victim's 1 KB uploads stored: %d of 14", stored)
	require.Equal(t, 14, stored)
}

// kitUploadBytes posts data as a file to channelID on the kit at url.
func kitUploadBytes(t *testing.T, url, channelID string, data []byte) (int, string) {
	t.Helper()
	body, ct := form{filename: "v.txt", file: data}.encode(t)
	req, err := http.NewRequest(http.MethodPost, url+"/files/uploads", body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", ct)
	req.Header.Set(connector.HeaderChannelID, channelID)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// trickle is the upload holding a slot: a declared 256 KiB file (so the
// store's room is never what refuses it) sent at 2 KiB every 50 ms.
func trickle(channelID string) rawUpload {
	return rawUpload{channel: channelID, size: 256 << 10, piece: 2 << 10, every: 50 * time.Millisecond}
}

// TestAttack_OnePeersSlowUploadsLeaveAnotherASlot (issue 37): one
// connector_id holds slow uploads on 9 channels: its floor of one upload
// slot and the MaxConcurrentUploads (8) slots shared beyond the floors;
// its 10th upload is answered uploads_busy. Another connector_id's 1 KB
// upload is then stored, read in a slot of its own floor. Before, the 8
// slots were shared by all peers: the first peer's 9th upload and the
// other's were answered 503 uploads_busy.
func TestAttack_OnePeersSlowUploadsLeaveAnotherASlot(t *testing.T) {
	store, url, ctx, attacker, victim := uploadPeers(t)
	addr := strings.TrimPrefix(url, "http://")
	held := connector.UploadSlotFloor + connector.DefaultMaxConcurrentUploads
	answers := make(chan int, held+1)
	upCtx, stop := context.WithCancel(ctx)
	defer stop()
	var chans []string
	for range held + 1 {
		ch, err := attacker.OpenChannel(ctx, "")
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	for _, ch := range chans[:held] {
		trickle(ch).start(upCtx, t, addr, answers)
	}
	require.Eventually(t, func() bool { return int(store.granted.Load())+len(answers) >= held }, 10*time.Second, 5*time.Millisecond)
	require.Empty(t, answers, "the attacker's uploads within its floor and the shared slots are all read")
	require.EqualValues(t, held, store.granted.Load())

	trickle(chans[held]).start(upCtx, t, addr, answers)
	select {
	case st := <-answers:
		require.Equal(t, http.StatusServiceUnavailable, st, "one upload past the attacker's floor and the shared slots")
	case <-ctx.Done():
		t.Fatal("the attacker's upload past its slots was not answered")
	}

	vch, err := victim.OpenChannel(ctx, "")
	require.NoError(t, err)
	st, body := kitUploadBytes(t, url, vch, bytes.Repeat([]byte{'v'}, 1<<10))
	require.Equal(t, http.StatusOK, st, "the victim's upload, while the attacker holds %d slots: %s", held, body)
}
