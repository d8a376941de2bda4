package connector_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
)

// TestDiskStore_T1_KeepOutlivesTheProcess: a DiskStore with Keep leaves
// its files at Close, and a new one on the same Dir serves them with the
// same metadata; what was deleted stays gone, what expired meanwhile is
// removed by the load, and so are half-written files; other names in Dir
// are left alone.
func TestDiskStore_T1_KeepOutlivesTheProcess(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(epoch)
	dir := t.TempDir()
	open := func() *connector.DiskStore {
		s, err := connector.NewDiskStore(connector.DiskStoreOptions{Dir: dir, Keep: true, Clock: clock, TTL: time.Minute})
		require.NoError(t, err)
		return s
	}
	s := open()
	data := bytes.Repeat([]byte("photo"), 20<<10)
	a, err := s.Put(ctx, "cch_1", "a.png", "image/png", bytes.NewReader(data))
	require.NoError(t, err)
	b, err := s.Put(ctx, "cch_1", "b.txt", "", strings.NewReader("b"))
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "cch_1", b.FileRef))
	require.NoError(t, s.Close())

	// What a crash mid-write leaves, and a file that is not the store's.
	half := "file_" + strings.Repeat("ab", 16)
	require.NoError(t, os.WriteFile(filepath.Join(dir, half), []byte("half"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, half+".meta.tmp"), []byte("{"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600))

	s = open()
	rc, info, err := s.Open(ctx, "cch_1", a.FileRef)
	require.NoError(t, err, "a kept file opens after the restart")
	got, err := io.ReadAll(rc)
	require.NoError(t, rc.Close())
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Equal(t, a.Filename, info.Filename)
	require.Equal(t, a.MimeType, info.MimeType)
	require.Equal(t, a.ByteSize, info.ByteSize)
	require.True(t, a.ExpiresAt.Equal(info.ExpiresAt), "the expiry it was put with")
	_, _, err = s.Open(ctx, "cch_2", a.FileRef)
	require.ErrorIs(t, err, connector.ErrWrongChannel, "its channel kept")
	_, _, err = s.Open(ctx, "cch_1", b.FileRef)
	require.ErrorIs(t, err, connector.ErrFileNotFound, "a deleted file stays gone")
	n, total := s.Len()
	require.Equal(t, 1, n)
	require.Equal(t, int64(len(data)), total, "the caps count the kept file")
	require.NoFileExists(t, filepath.Join(dir, half))
	require.NoFileExists(t, filepath.Join(dir, half+".meta.tmp"))
	require.FileExists(t, filepath.Join(dir, "notes.txt"))
	require.NoError(t, s.Close())

	clock.Advance(time.Minute)
	s = open()
	n, _ = s.Len()
	require.Zero(t, n, "expired while closed")
	require.NoFileExists(t, filepath.Join(dir, a.FileRef))
	require.NoFileExists(t, filepath.Join(dir, a.FileRef+".meta"))
	require.NoError(t, s.Close())
}

// TestDiskStore_T1_KeepNeedsADir: Keep without a Dir fails.
func TestDiskStore_T1_KeepNeedsADir(t *testing.T) {
	_, err := connector.NewDiskStore(connector.DiskStoreOptions{Keep: true})
	require.Error(t, err)
}
