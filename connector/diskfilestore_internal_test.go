package connector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/fakeclock"
)

var diskEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestDiskFileStore(t *testing.T) (*DiskFileStore, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(diskEpoch)
	s, err := NewDiskFileStore(DiskFileStoreOptions{Dir: t.TempDir(), Clock: clk, TTL: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, clk
}

// blockingIO stands in for a slow disk: each call signals entered, then
// waits for release.
type blockingIO struct{ entered, release chan struct{} }

func newBlockingIO() *blockingIO {
	return &blockingIO{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blockingIO) wait() { b.entered <- struct{}{}; <-b.release }

// requireUnlocked fails unless the store's mutex is free at this moment:
// the slow I/O in flight must not hold it. TryLock needs no timing.
func requireUnlocked(t *testing.T, s *DiskFileStore, what string) {
	t.Helper()
	if !s.mu.TryLock() {
		t.Fatalf("%s runs under the store mutex: every other caller waits for the disk", what)
	}
	s.mu.Unlock()
}

// A slow unlink, whichever call triggers it (the sweep of Reserve and Put,
// Delete, the expiry an Open finds, Len), holds no lock: another Put and
// Open go on meanwhile, and the file is gone once the unlink ends.
func TestDiskFileStore_T1_UnlinkRunsOutsideTheLock(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		expire  bool // advance the clock past the victim's TTL first
		trigger func(s *DiskFileStore, victim string) error
	}{
		{"the sweep of Put", true, func(s *DiskFileStore, _ string) error {
			_, err := s.Put(ctx, "cch_1", "x", "", strings.NewReader("x"))
			return err
		}},
		{"Delete", false, func(s *DiskFileStore, victim string) error { return s.Delete(ctx, "cch_1", victim) }},
		{"an Open of an expired file", true, func(s *DiskFileStore, victim string) error {
			_, _, err := s.Open(ctx, "cch_1", victim)
			if errors.Is(err, ErrFileNotFound) {
				return nil
			}
			return err
		}},
		{"Len", true, func(s *DiskFileStore, _ string) error { s.Len(); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newTestDiskFileStore(t)
			victim, err := s.Put(ctx, "cch_1", "victim", "", strings.NewReader("old"))
			require.NoError(t, err)
			if tc.expire {
				clk.Advance(time.Minute)
			}
			slow := newBlockingIO()
			s.remove = func(p string) error { slow.wait(); return os.Remove(p) }
			done := make(chan error, 1)
			go func() { done <- tc.trigger(s, victim.FileRef) }()
			<-slow.entered
			func() {
				defer func() { // let the trigger end whatever happens here
					close(slow.release)
					require.NoError(t, <-done)
				}()
				requireUnlocked(t, s, "the unlink")
				other, err := s.Put(ctx, "cch_2", "other", "", strings.NewReader("new"))
				require.NoError(t, err, "another Put goes on during the unlink")
				rc, _, err := s.Open(ctx, "cch_2", other.FileRef)
				require.NoError(t, err, "another Open goes on during the unlink")
				b, err := io.ReadAll(rc)
				require.NoError(t, err)
				require.NoError(t, rc.Close())
				require.Equal(t, "new", string(b))
			}()
			require.NoFileExists(t, s.dir+"/"+victim.FileRef, "the unlink ran")
			_, _, err = s.Open(ctx, "cch_1", victim.FileRef)
			require.ErrorIs(t, err, ErrFileNotFound)
		})
	}
}

// A slow open holds no lock either.
func TestDiskFileStore_T1_OpenRunsOutsideTheLock(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestDiskFileStore(t)
	f, err := s.Put(ctx, "cch_1", "f", "", strings.NewReader("bytes"))
	require.NoError(t, err)
	slow := newBlockingIO()
	s.open = func(p string) (*os.File, error) { slow.wait(); return os.Open(p) }
	type opened struct {
		rc   io.ReadCloser
		info FileInfo
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		rc, info, err := s.Open(ctx, "cch_1", f.FileRef)
		done <- opened{rc, info, err}
	}()
	<-slow.entered
	var got opened
	func() {
		defer func() { close(slow.release); got = <-done }()
		requireUnlocked(t, s, "the open")
		_, err := s.Put(ctx, "cch_2", "other", "", strings.NewReader("x"))
		require.NoError(t, err, "another Put goes on during the open")
	}()
	require.NoError(t, got.err)
	require.Equal(t, f, got.info)
	b, err := io.ReadAll(got.rc)
	require.NoError(t, err)
	require.NoError(t, got.rc.Close())
	require.Equal(t, "bytes", string(b))
}

// Open looks the file up under the lock and opens it after: a Delete
// between the two makes it "not found", and a Delete after the open
// leaves the reader its bytes (an open file outlives its unlink).
func TestDiskFileStore_T1_OpenRacingDelete(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestDiskFileStore(t)
	content := bytes.Repeat([]byte("z"), 3*diskCopyBuf)

	gone, err := s.Put(ctx, "cch_1", "gone", "", bytes.NewReader(content))
	require.NoError(t, err)
	s.open = func(p string) (*os.File, error) {
		if !s.mu.TryLock() { // Delete would deadlock: fail, do not hang
			return nil, errors.New("the open runs under the store mutex")
		}
		s.mu.Unlock()
		if err := s.Delete(ctx, "cch_1", gone.FileRef); err != nil { // another caller, in between
			return nil, err
		}
		return os.Open(p)
	}
	_, _, err = s.Open(ctx, "cch_1", gone.FileRef)
	require.ErrorIs(t, err, ErrFileNotFound, "a file deleted before it was opened is not found")

	kept, err := s.Put(ctx, "cch_1", "kept", "", bytes.NewReader(content))
	require.NoError(t, err)
	s.open = os.Open
	rc, _, err := s.Open(ctx, "cch_1", kept.FileRef)
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "cch_1", kept.FileRef))
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, content, b, "the reader keeps the bytes of a file deleted after it was opened")
}
