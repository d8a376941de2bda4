package connector_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
)

func TestMemoryFileStore_T1_Caps(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(epoch)
	s := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{
		Clock: clock, TTL: time.Minute, MaxFileBytes: 10, MaxTotalBytes: 25, MaxFiles: 3,
	})
	put := func(n int) error {
		_, err := s.Put(ctx, "cch_1", "f", "", bytes.NewReader(make([]byte, n)))
		return err
	}
	// Per-file cap.
	assert.ErrorIs(t, put(11), connector.ErrFileTooLarge)
	require.NoError(t, put(10))
	require.NoError(t, put(10))
	// Total bytes cap: 20 + 6 > 25.
	assert.ErrorIs(t, put(6), connector.ErrStoreFull)
	require.NoError(t, put(5))
	// Count cap: 3 files.
	assert.ErrorIs(t, put(0), connector.ErrStoreFull)
	n, total := s.Len()
	assert.Equal(t, 3, n)
	assert.Equal(t, int64(25), total)
	// Expiry frees room without any goroutine (the clock has no timers).
	assert.Zero(t, clock.Pending())
	clock.Advance(time.Minute)
	require.NoError(t, put(10))
	n, total = s.Len()
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(10), total)
}

func TestMemoryFileStore_T2_ExpiryChannelAndDelete(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New(epoch)
	s := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{Clock: clock, TTL: time.Minute})
	info, err := s.Put(ctx, "cch_1", "note.txt", "text/plain", strings.NewReader("hello"))
	require.NoError(t, err)
	assert.Equal(t, epoch.Add(time.Minute), info.ExpiresAt)
	assert.Equal(t, imv2.FileFile, info.Type)
	assert.Equal(t, "text/plain", info.MimeType)

	_, _, err = s.Open(ctx, "cch_2", info.FileRef)
	assert.ErrorIs(t, err, connector.ErrWrongChannel)
	assert.ErrorIs(t, s.Delete(ctx, "cch_2", info.FileRef), connector.ErrWrongChannel)

	rc, got, err := s.Open(ctx, "cch_1", info.FileRef)
	require.NoError(t, err)
	b, _ := io.ReadAll(rc)
	assert.Equal(t, "hello", string(b))
	assert.Equal(t, info, got)

	clock.Advance(time.Minute - time.Nanosecond)
	_, _, err = s.Open(ctx, "cch_1", info.FileRef)
	require.NoError(t, err)
	clock.Advance(time.Nanosecond)
	_, _, err = s.Open(ctx, "cch_1", info.FileRef)
	assert.ErrorIs(t, err, connector.ErrFileNotFound)

	info, err = s.Put(ctx, "cch_1", "x", "", strings.NewReader("x"))
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "cch_1", info.FileRef))
	_, _, err = s.Open(ctx, "cch_1", info.FileRef)
	assert.ErrorIs(t, err, connector.ErrFileNotFound)
	require.NoError(t, s.Delete(ctx, "cch_1", info.FileRef), "deleting twice is fine")

	_, err = s.Put(ctx, "", "x", "", strings.NewReader("x"))
	assert.Error(t, err)
}

func TestMemoryFileStore_M8_FilenameCleaned(t *testing.T) {
	s := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
	for in, want := range map[string]string{
		"../../etc/passwd":       "passwd",
		`C:\Users\me\report.pdf`: "report.pdf",
		"a\x00b\nc.txt":          "abc.txt",
		"":                       "file",
		"..":                     "file",
		strings.Repeat("é", 300): strings.Repeat("é", 255), // characters, not bytes
		"ok name (1).txt":        "ok name (1).txt",
		"/":                      "file",
	} {
		info, err := s.Put(context.Background(), "cch_1", in, "", strings.NewReader("x"))
		require.NoError(t, err)
		assert.Equal(t, want, info.Filename, "%q", in)
		f := imv2.File{Type: info.Type, FileRef: info.FileRef, Filename: info.Filename}
		m := imv2.ChatMessage{MessageID: "m", Files: []imv2.File{f}}
		assert.NoError(t, m.Validate(imv2.ToConnector))
	}
}
