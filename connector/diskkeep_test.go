package connector_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
)

// TestDiskFileStore_T1_KeepOutlivesTheProcess: a DiskFileStore with Keep leaves
// its files at Close, and a new one on the same Dir serves them with the
// same metadata; what was deleted stays gone, what expired meanwhile is
// removed by the load, and so are half-written files; other names in Dir
// are left alone.
func TestDiskFileStore_T1_KeepOutlivesTheProcess(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(epoch)
	dir := t.TempDir()
	open := func() *connector.DiskFileStore {
		s, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true, Clock: clock, TTL: time.Minute})
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

// TestDiskFileStore_T1_KeepNeedsADir: Keep without a Dir fails.
func TestDiskFileStore_T1_KeepNeedsADir(t *testing.T) {
	_, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Keep: true})
	require.Error(t, err)
}

// TestDiskFileStore_T1_KeepOneStorePerDir: a second kept store on a Dir in use
// fails (it would take up and remove the first one's files in flight);
// after Close the Dir opens again.
func TestDiskFileStore_T1_KeepOneStorePerDir(t *testing.T) {
	dir := t.TempDir()
	first, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true})
	require.NoError(t, err)
	_, err = connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true})
	require.ErrorContains(t, err, "in use")
	require.NoError(t, first.Close())
	again, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true})
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// TestDiskFileStore_T1_KeepLoadTrustsOnlyWhatItWrote: on load, a record
// without its bytes and one whose size differs are removed, a symlink named
// like a file is not taken up (nor its target touched), and an expiry
// beyond TTL from now is cut to it.
func TestDiskFileStore_T1_KeepLoadTrustsOnlyWhatItWrote(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(epoch)
	dir := t.TempDir()
	ref := func(c string) string { return "file_" + strings.Repeat(c, 32) }
	record := func(r string, size int, expires time.Time) {
		t.Helper()
		meta := `{"channel":"cch_1","file_ref":"` + r + `","type":"file","filename":"x","mime_type":"text/plain","byte_size":` +
			strconv.Itoa(size) + `,"expires_at":"` + expires.Format(time.RFC3339Nano) + `"}`
		require.NoError(t, os.WriteFile(filepath.Join(dir, r+".meta"), []byte(meta), 0o600))
	}
	record(ref("a"), 3, epoch.Add(time.Minute)) // no bytes
	record(ref("b"), 3, epoch.Add(time.Minute)) // 4 bytes
	require.NoError(t, os.WriteFile(filepath.Join(dir, ref("b")), []byte("four"), 0o600))
	record(ref("c"), 3, epoch.Add(100*365*24*time.Hour)) // a century
	require.NoError(t, os.WriteFile(filepath.Join(dir, ref("c")), []byte("far"), 0o600))
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("abc"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, ref("d"))))
	record(ref("d"), 3, epoch.Add(time.Minute))

	s, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true, Clock: clock, TTL: time.Minute})
	require.NoError(t, err)
	defer s.Close()
	for _, r := range []string{ref("a"), ref("b"), ref("d")} {
		_, _, err := s.Open(ctx, "cch_1", r)
		require.ErrorIs(t, err, connector.ErrFileNotFound, r)
	}
	require.NoFileExists(t, filepath.Join(dir, ref("a")+".meta"))
	require.NoFileExists(t, filepath.Join(dir, ref("b")))
	require.FileExists(t, outside, "a symlink's target is never touched")
	rc, info, err := s.Open(ctx, "cch_1", ref("c"))
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.True(t, info.ExpiresAt.Equal(epoch.Add(time.Minute)), "expiry cut to TTL: %v", info.ExpiresAt)
}

// TestDiskFileStore_T1_PutAfterCloseWritesNothing: a reservation's Put after
// the store closed fails with ErrClosed before it reads or writes a byte.
func TestDiskFileStore_T1_PutAfterCloseWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true})
	require.NoError(t, err)
	res, err := s.Reserve(context.Background(), "cch_1", 4)
	require.NoError(t, err)
	defer res.Release()
	require.NoError(t, s.Close())
	_, err = res.Put(context.Background(), "a.txt", "", neverRead{t})
	require.ErrorIs(t, err, imv2.ErrClosed)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.Equal(t, ".lock", e.Name(), "only the lock file is left")
	}
}
