package connector_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
)

// storeCaps are the caps every store in the contract test is built with.
type storeCaps struct {
	clock             *fakeclock.Clock
	ttl               time.Duration
	maxFile, maxTotal int64
	maxFiles          int
}

// stores builds every FileStore implementation of this package with caps.
var stores = map[string]func(t *testing.T, c storeCaps) connector.Reserver{
	"memory": func(t *testing.T, c storeCaps) connector.Reserver {
		return connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{
			Clock: c.clock, TTL: c.ttl, MaxFileBytes: c.maxFile, MaxTotalBytes: c.maxTotal, MaxFiles: c.maxFiles,
		})
	},
	"disk-keep": func(t *testing.T, c storeCaps) connector.Reserver {
		s, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{
			Dir: t.TempDir(), Keep: true, Clock: c.clock, TTL: c.ttl, MaxFileBytes: c.maxFile, MaxTotalBytes: c.maxTotal, MaxFiles: c.maxFiles,
		})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	},
	"disk": func(t *testing.T, c storeCaps) connector.Reserver {
		s, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{
			Dir: t.TempDir(), Clock: c.clock, TTL: c.ttl, MaxFileBytes: c.maxFile, MaxTotalBytes: c.maxTotal, MaxFiles: c.maxFiles,
		})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	},
}

// neverRead fails the test if a store reads it: a refusal must come first.
type neverRead struct{ t *testing.T }

func (n neverRead) Read([]byte) (int, error) {
	n.t.Error("the store read a body it should have refused first")
	return 0, io.EOF
}

// TestFileStore_T1_T2_Contract runs every FileStore through one contract:
// round trip, metadata, caps (per file, total, count, checked as bytes
// arrive and, through Reserve, before), reservations given back, expiry
// on the injected clock, channel binding, delete, bad input, concurrency.
func TestFileStore_T1_T2_Contract(t *testing.T) {
	ctx := context.Background()
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			clock := fakeclock.New(epoch)
			caps := storeCaps{clock: clock, ttl: time.Minute, maxFile: 200 << 10, maxTotal: 500 << 10, maxFiles: 4}
			put := func(s connector.FileStore, n int) (connector.FileInfo, error) {
				return s.Put(ctx, "cch_1", "f.bin", "", bytes.NewReader(bytes.Repeat([]byte{'x'}, n)))
			}

			t.Run("round_trip", func(t *testing.T) {
				s := mk(t, caps)
				data := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160,000 bytes: several pieces
				info, err := s.Put(ctx, "cch_1", "../dir/note.txt", "", bytes.NewReader(data))
				require.NoError(t, err)
				assert.Equal(t, "note.txt", info.Filename)
				assert.Equal(t, "text/plain; charset=utf-8", info.MimeType)
				assert.Equal(t, imv2.FileFile, info.Type)
				assert.Equal(t, int64(len(data)), info.ByteSize)
				assert.Equal(t, epoch.Add(time.Minute), info.ExpiresAt)
				assert.Regexp(t, `^[A-Za-z0-9_-]{16,128}$`, info.FileRef)
				rc, got, err := s.Open(ctx, "cch_1", info.FileRef)
				require.NoError(t, err)
				b, err := io.ReadAll(rc)
				require.NoError(t, rc.Close())
				require.NoError(t, err)
				assert.Equal(t, data, b)
				assert.Equal(t, info, got)

				img, err := s.Put(ctx, "cch_1", "x", "image/png", strings.NewReader("\x89PNG"))
				require.NoError(t, err)
				assert.Equal(t, imv2.FileImage, img.Type)
				assert.NotEqual(t, info.FileRef, img.FileRef)
			})

			t.Run("caps_while_reading", func(t *testing.T) {
				s := mk(t, caps)
				_, err := put(s, 200<<10+1)
				assert.ErrorIs(t, err, connector.ErrFileTooLarge)
				_, err = put(s, 200<<10)
				require.NoError(t, err)
				_, err = put(s, 200<<10)
				require.NoError(t, err)
				_, err = put(s, 100<<10+1) // 400 KiB + 100 KiB + 1 > 500 KiB
				assert.ErrorIs(t, err, connector.ErrStoreFull)
				_, err = put(s, 100<<10)
				require.NoError(t, err)
				_, err = put(s, 0)
				require.NoError(t, err)
				_, err = s.Put(ctx, "cch_1", "f", "", neverRead{t}) // count cap: 4 files
				assert.ErrorIs(t, err, connector.ErrStoreFull)
				// A failed Put left nothing behind: expiry frees it all.
				clock.Advance(time.Minute)
				_, err = put(s, 200<<10)
				require.NoError(t, err)
			})

			t.Run("reserve_before_reading", func(t *testing.T) {
				s := mk(t, caps)
				r1, err := s.Reserve(ctx, "cch_1", 300<<10) // clamped to the per-file cap
				require.NoError(t, err)
				r2, err := s.Reserve(ctx, "cch_2", 200<<10)
				require.NoError(t, err)
				_, err = s.Reserve(ctx, "cch_3", 200<<10)
				assert.ErrorIs(t, err, connector.ErrStoreFull, "400 KiB reserved of 500")
				_, err = s.Put(ctx, "cch_1", "f", "", bytes.NewReader(make([]byte, 100<<10+1)))
				assert.ErrorIs(t, err, connector.ErrStoreFull, "reserved room is taken")

				info, err := r1.Put(ctx, "a", "", strings.NewReader("small"))
				require.NoError(t, err)
				r1.Release()
				r1.Release() // twice is fine
				_, err = r1.Put(ctx, "a", "", strings.NewReader("again"))
				assert.Error(t, err, "a reservation stores one file")
				r2.Release() // never used: all back
				// 5 bytes stored, 2 of 4 slots free again.
				r3, err := s.Reserve(ctx, "cch_3", 200<<10)
				require.NoError(t, err)
				r4, err := s.Reserve(ctx, "cch_4", 200<<10)
				require.NoError(t, err)
				_, err = s.Reserve(ctx, "cch_5", 0)
				require.NoError(t, err, "a fourth slot") // never released: the test ends with it
				_, err = s.Reserve(ctx, "cch_6", 0)
				assert.ErrorIs(t, err, connector.ErrStoreFull, "count cap counts reservations")
				r3.Release()
				r4.Release()
				rc, _, err := s.Open(ctx, "cch_1", info.FileRef)
				require.NoError(t, err)
				require.NoError(t, rc.Close())

				// A reserved file may grow past its reservation while there is room.
				r5, err := s.Reserve(ctx, "cch_7", 10)
				require.NoError(t, err)
				big, err := r5.Put(ctx, "b", "", bytes.NewReader(make([]byte, 150<<10)))
				require.NoError(t, err)
				assert.Equal(t, int64(150<<10), big.ByteSize)
				r5.Release()
			})

			t.Run("upload_shares", func(t *testing.T) {
				// 16 files: a channel's uploads (Reserve) get 2, all uploads
				// 14; the last 2 are kept for the Connector's own files (Put).
				s := mk(t, storeCaps{clock: clock, ttl: time.Minute, maxFile: 200 << 10, maxTotal: 1 << 20, maxFiles: 16})
				upload := func(ch string) error {
					r, err := s.Reserve(ctx, ch, 0)
					if err != nil {
						return err
					}
					defer r.Release()
					_, err = r.Put(ctx, "f", "", strings.NewReader("x"))
					return err
				}
				require.NoError(t, upload("cch_a"))
				require.NoError(t, upload("cch_a"))
				assert.ErrorIs(t, upload("cch_a"), connector.ErrStoreFull, "one channel's share")
				for i := range 6 {
					for range 2 {
						require.NoError(t, upload("cch_"+strconv.Itoa(i)))
					}
				}
				assert.ErrorIs(t, upload("cch_z"), connector.ErrStoreFull, "the uploads' share")
				for range 2 {
					_, err := s.Put(ctx, "cch_a", "own", "", strings.NewReader("x"))
					require.NoError(t, err, "the reserve is the Connector's own")
				}
				_, err := s.Put(ctx, "cch_a", "own", "", strings.NewReader("x"))
				assert.ErrorIs(t, err, connector.ErrStoreFull, "the count cap")
				// A channel's share in bytes: a quarter of the store, or one file of the largest size.
				r, err := s.Reserve(ctx, "cch_y", 200<<10)
				require.Error(t, err, "no file slot left")
				_ = r
			})

			t.Run("failed_put_gives_room_back", func(t *testing.T) {
				s := mk(t, caps)
				boom := errors.New("client went away")
				_, err := s.Put(ctx, "cch_1", "f", "", io.MultiReader(bytes.NewReader(make([]byte, 150<<10)), errReader{boom}))
				assert.ErrorIs(t, err, boom)
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				_, err = s.Put(cctx, "cch_1", "f", "", strings.NewReader("x"))
				assert.ErrorIs(t, err, context.Canceled)
				for range 2 {
					_, err = put(s, 200<<10)
					require.NoError(t, err, "the failed Puts hold no room")
				}
			})

			t.Run("expiry_channel_delete", func(t *testing.T) {
				s := mk(t, caps)
				info, err := put(s, 10)
				require.NoError(t, err)
				_, _, err = s.Open(ctx, "cch_2", info.FileRef)
				assert.ErrorIs(t, err, connector.ErrWrongChannel)
				assert.ErrorIs(t, s.Delete(ctx, "cch_2", info.FileRef), connector.ErrWrongChannel)
				clock.Advance(time.Minute - time.Nanosecond)
				rc, _, err := s.Open(ctx, "cch_1", info.FileRef)
				require.NoError(t, err)
				require.NoError(t, rc.Close())
				clock.Advance(time.Nanosecond)
				_, _, err = s.Open(ctx, "cch_1", info.FileRef)
				assert.ErrorIs(t, err, connector.ErrFileNotFound)

				info, err = put(s, 10)
				require.NoError(t, err)
				require.NoError(t, s.Delete(ctx, "cch_1", info.FileRef))
				_, _, err = s.Open(ctx, "cch_1", info.FileRef)
				assert.ErrorIs(t, err, connector.ErrFileNotFound)
				require.NoError(t, s.Delete(ctx, "cch_1", info.FileRef), "deleting twice is fine")
				_, _, err = s.Open(ctx, "cch_1", "file_00000000000000000000000000000000")
				assert.ErrorIs(t, err, connector.ErrFileNotFound)
			})

			t.Run("bad_input", func(t *testing.T) {
				s := mk(t, caps)
				for _, ch := range []string{"", "a b", strings.Repeat("c", imv2.MaxIDBytes+1)} {
					_, err := s.Put(ctx, ch, "f", "", neverRead{t})
					assert.Error(t, err, "%q", ch)
					_, err = s.Reserve(ctx, ch, 1)
					assert.Error(t, err, "%q", ch)
				}
			})

			t.Run("concurrent", func(t *testing.T) {
				s := mk(t, storeCaps{clock: clock, ttl: time.Minute, maxFile: 1 << 10, maxTotal: 64 << 10, maxFiles: 1024})
				var wg sync.WaitGroup
				var mu sync.Mutex
				ok, full := 0, 0
				for i := range 100 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						info, err := put(s, 1<<10)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							ok++
							if i%2 == 0 {
								assert.NoError(t, s.Delete(ctx, "cch_1", info.FileRef))
							}
						case errors.Is(err, connector.ErrStoreFull):
							full++
						default:
							t.Error(err)
						}
					}()
				}
				wg.Wait()
				assert.Equal(t, 100, ok+full)
				assert.GreaterOrEqual(t, ok, 64)
			})
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestDiskFileStore_T1_FilesOnDiskRemovedOnClose: a DiskFileStore's bytes are in
// files in its own 0700 directory, expiry and Delete remove them, and
// Close removes the directory.
func TestDiskFileStore_T1_FilesOnDiskRemovedOnClose(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(epoch)
	parent := t.TempDir()
	s, err := connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: parent, Clock: clock, TTL: time.Minute})
	require.NoError(t, err)
	fi, err := os.Stat(s.Dir())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	assert.Equal(t, parent, filepath.Dir(s.Dir()))

	a, err := s.Put(ctx, "cch_1", "a", "", bytes.NewReader(make([]byte, 100<<10)))
	require.NoError(t, err)
	b, err := s.Put(ctx, "cch_1", "b", "", strings.NewReader("b"))
	require.NoError(t, err)
	fi, err = os.Stat(filepath.Join(s.Dir(), a.FileRef))
	require.NoError(t, err)
	assert.Equal(t, int64(100<<10), fi.Size())
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.NoError(t, s.Delete(ctx, "cch_1", b.FileRef))
	assert.NoFileExists(t, filepath.Join(s.Dir(), b.FileRef))
	clock.Advance(time.Minute)
	n, _ := s.Len()
	assert.Zero(t, n)
	assert.NoFileExists(t, filepath.Join(s.Dir(), a.FileRef), "expiry removes the file")

	// A failed Put leaves no file.
	_, err = s.Put(ctx, "cch_1", "c", "", errReader{errors.New("cut")})
	require.Error(t, err)
	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	assert.Empty(t, entries)

	_, err = s.Put(ctx, "cch_1", "d", "", strings.NewReader("d"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.NoDirExists(t, s.Dir())
	require.NoError(t, s.Close(), "closing twice is fine")
	_, err = s.Put(ctx, "cch_1", "e", "", strings.NewReader("e"))
	assert.ErrorIs(t, err, imv2.ErrClosed)
}
