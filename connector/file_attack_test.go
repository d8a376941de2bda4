package connector_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/state"
)

// TestAttack_DiskFileStoreServesOnlyTheFileItStored (issue 26, attack 5): a
// stored file swapped, under its name, for a symlink to a secret or for
// another file of the same size is not served through the file's existing
// signed URL (404 file_not_found, not a byte of the other file). Before the
// fix the Handler followed the symlink and served the secret.
func TestAttack_DiskFileStoreServesOnlyTheFileItStored(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := "temporary"
		if keep {
			name = "keep"
		}
		t.Run(name, func(t *testing.T) {
			clock := fakeclock.New(epoch)
			store, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: t.TempDir(), Keep: keep, Clock: clock})
			require.NoError(t, err)
			t.Cleanup(func() { _ = store.Close() })
			e := newEnv(t, func(c *connector.HandlerConfig) { c.Files = store; c.Clock = clock })
			secret := filepath.Join(t.TempDir(), "passwd")
			require.NoError(t, os.WriteFile(secret, []byte("root:x:0:0:secret"), 0o600))

			get := func(url string) (int, string) {
				res, err := e.srv.Client().Get(e.srv.URL + url)
				require.NoError(t, err)
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(b)
			}
			up := mustUpload(t, e, "cch_1", form{filename: "a.txt", file: []byte("the stored bytes")})
			url := e.h.DownloadURL("cch_1", up.FileRef)
			st, body := get(url)
			require.Equal(t, http.StatusOK, st)
			require.Equal(t, "the stored bytes", body)

			path := filepath.Join(store.Dir(), up.FileRef)
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Symlink(secret, path))
			st, body = get(url)
			assert.Equal(t, http.StatusNotFound, st, "a symlink swapped in is not followed")
			assert.NotContains(t, body, "secret")

			require.NoError(t, os.Remove(path))
			other := []byte("other bytes, same len"[:len("the stored bytes")])
			require.NoError(t, os.WriteFile(path, other, 0o600)) // may even take the freed inode
			st, body = get(url)
			assert.Equal(t, http.StatusNotFound, st, "another file under the stored name is not served")
			assert.NotContains(t, body, "other bytes")
		})
	}
}

// TestAttack_KeptDirMadePrivate (issue 26, attack 5): DiskFileStoreOptions.Keep
// on an existing 0777 directory makes it 0700 before any file goes in, so
// another local user can neither read the files nor swap them; a symlink
// in place of the directory is refused. Before the fix the directory was
// used as it was.
func TestAttack_KeptDirMadePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "files")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777)) // past the umask
	s, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true, Clock: fakeclock.New(epoch), TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(dir, link))
	_, err = connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: link, Keep: true})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "symlink"), err.Error())
}

// kitUpload posts a one-byte file to channelID on the kit at url.
func kitUpload(t *testing.T, url, channelID string) (int, string) {
	t.Helper()
	body, ct := form{filename: "a.txt", file: []byte("x")}.encode(t)
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

// TestAttack_UploadsOnlyToOpenChannels (issue 26, attack 5): 1,024
// one-byte uploads to channel IDs never issued filled the kit's store, and
// the Connector's own user files then failed file_store_full for an hour.
// Over a real connection: an upload to a channel never issued, and to one
// closed since, is answered 409 channel_not_open before its body is read
// and stores nothing; to the open channel it is stored. Before the fix
// the upload to "cch_never_issued" was stored (200).
func TestAttack_UploadsOnlyToOpenChannels(t *testing.T) {
	files := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
	_, url := startKit(t, newPretend(0), "", connector.Options{Files: files})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, Target: inbound(make(chan imv2.ChatMessage, 1))})
	require.NoError(t, err)
	defer cli.Close()

	for range 16 {
		st, body := kitUpload(t, url, "cch_never_issued")
		require.Equal(t, http.StatusConflict, st, body)
		require.Contains(t, body, string(imv2.CodeChannelNotOpen))
	}
	n, _ := files.Len()
	require.Zero(t, n, "nothing stored for a channel never issued")

	ch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	st, body := kitUpload(t, url, ch)
	require.Equal(t, http.StatusOK, st, body)
	require.NoError(t, cli.CloseChannel(ctx, ch))
	st, _ = kitUpload(t, url, ch)
	require.Equal(t, http.StatusConflict, st, "closed since")
	n, _ = files.Len()
	require.Equal(t, 1, n)
}

// TestAttack_TricklingUploadsFreeTheirSlots (issue 26, attack 5): eight
// uploads declaring the largest size and then sending a byte now and then
// held every upload slot for the whole UploadTimeout (5 min). A body must
// keep up the slowest rate served after its first 1 MiB share (about 9 s
// at the defaults), so they are cut and the next upload is served. No
// wall time passes: the Handler's network clock is pinned 60 s back, past
// the first share but within the 5 min the old code gave. Before the fix
// the eight connections stayed open (waitClosed failed) and the ninth
// upload was answered 503 uploads_busy.
func TestAttack_TricklingUploadsFreeTheirSlots(t *testing.T) {
	e := newEnv(t, nil)
	var back atomic.Int64
	back.Store(int64(60 * time.Second))
	connector.SetNetNow(e.h, func() time.Time { return time.Now().Add(-time.Duration(back.Load())) })
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	conns := make([]net.Conn, connector.DefaultMaxConcurrentUploads)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = fmt.Fprintf(c, "POST /files/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s: cch_1\r\n"+
			"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n"+
			"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nx",
			testKey, connector.HeaderChannelID, connector.DefaultMaxUploadBytes)
		require.NoError(t, err)
		conns[i] = c
	}
	for _, c := range conns {
		waitClosed(t, c) // cut: the trickle did not earn its deadline
	}
	back.Store(0)
	r := e.upload(t, "cch_1", form{filename: "b.txt", file: []byte("served")})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	n, _ := e.store.FileStore.(*connector.MemoryFileStore).Len()
	assert.Equal(t, 1, n, "only the ninth upload was stored")
}

// TestAttack_UploadFloodLeavesRoomForUserFiles (issue 26, attack 5): a
// key holder's one-byte uploads filled the store's file slots, and the
// Connector's own user files (OfferFile) then failed file_store_full until
// the uploads expired an hour later. Over a real connection, into a store
// of 64 files: one channel's uploads stop at its share (8), every
// channel's at the uploads' share (56), answered 503 file_store_full, and
// OfferFile still stores the users' files in the reserve kept for them.
// Before the fix all 64 uploads went to one channel and OfferFile failed.
func TestAttack_UploadFloodLeavesRoomForUserFiles(t *testing.T) {
	e := newEnv(t, func(c *connector.HandlerConfig) {
		c.Files = connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{MaxFiles: 64})
	})
	stored := func(ch string) bool {
		r := e.upload(t, ch, form{filename: "a", file: []byte("x")})
		if r.status == http.StatusOK {
			return true
		}
		require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.body))
		require.Equal(t, string(connector.CodeStoreFull), errCode(t, r.body))
		return false
	}
	n := 0
	for n < 64 && stored("cch_attacker") {
		n++
	}
	assert.Equal(t, 8, n, "one channel's share of 64 files")
	for i := 0; n < 64 && stored(fmt.Sprintf("cch_a%d", i/8)); i++ {
		n++
	}
	assert.Equal(t, 56, n, "the uploads' share of 64 files")
	for i := range 8 {
		f, err := e.h.OfferFile(context.Background(), "cch_user", fmt.Sprintf("photo%d.png", i), "image/png", strings.NewReader("png"))
		require.NoError(t, err, "the user's file %d", i)
		require.NotEmpty(t, f.DownloadURL)
	}
}

// TestAttack_UploadsOnlyToOpenChannels_Replica: with a Relay (replicas on
// one Store), xAgent may hold a channel open on one replica and upload to
// another: the replica takes an upload to a channel issued in the shared
// Store, and still refuses one never issued.
func TestAttack_UploadsOnlyToOpenChannels_Replica(t *testing.T) {
	st := &smallStore{imv2.NewMemoryPendingStore(0), imv2.NewMemoryCompletedStore(0, 0, nil),
		state.NewMemoryRegistry(0), state.NewMemoryBindingStore(0)}
	holder, replica := &memRelay{}, &memRelay{}
	holder.peer, replica.peer = replica, holder
	_, url := startKit(t, newPretend(0), "", connector.Options{Store: st, Advanced: connector.Advanced{Relay: holder}})
	_, replicaURL := startKit(t, newPretend(0), "", connector.Options{Store: st, Advanced: connector.Advanced{Relay: replica}})
	_, ch := newAgent().dial(t, url)

	st2, body := kitUpload(t, replicaURL, ch)
	require.Equal(t, http.StatusOK, st2, body)
	st2, body = kitUpload(t, replicaURL, "cch_never_issued")
	require.Equal(t, http.StatusConflict, st2, body)
}
