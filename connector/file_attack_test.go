package connector_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
)

// TestAttack_DiskStoreServesOnlyTheFileItStored (issue 26, attack 5): a
// stored file swapped, under its name, for a symlink to a secret or for
// another file of the same size is not served through the file's existing
// signed URL (404 file_not_found, not a byte of the other file). Before the
// fix the Handler followed the symlink and served the secret.
func TestAttack_DiskStoreServesOnlyTheFileItStored(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := "temporary"
		if keep {
			name = "keep"
		}
		t.Run(name, func(t *testing.T) {
			clock := fakeclock.New(epoch)
			store, err := connector.NewDiskStore(connector.DiskStoreOptions{Dir: t.TempDir(), Keep: keep, Clock: clock})
			require.NoError(t, err)
			t.Cleanup(func() { _ = store.Close() })
			e := newEnv(t, func(c *connector.Config) { c.Files = store; c.Clock = clock })
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

// TestAttack_KeptDirMadePrivate (issue 26, attack 5): DiskStoreOptions.Keep
// on an existing 0777 directory makes it 0700 before any file goes in, so
// another local user can neither read the files nor swap them; a symlink
// in place of the directory is refused. Before the fix the directory was
// used as it was.
func TestAttack_KeptDirMadePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "files")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777)) // past the umask
	s, err := connector.NewDiskStore(connector.DiskStoreOptions{Dir: dir, Keep: true, Clock: fakeclock.New(epoch), TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(dir, link))
	_, err = connector.NewDiskStore(connector.DiskStoreOptions{Dir: link, Keep: true})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "symlink"), err.Error())
}
