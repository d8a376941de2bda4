package connector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
)

// Defaults of MemoryStoreOptions.
const (
	DefaultFileTTL       = time.Hour
	DefaultMaxFileBytes  = 32 << 20
	DefaultMaxTotalBytes = 256 << 20
	DefaultMaxFiles      = 1024
)

// MemoryStoreOptions configure NewMemoryStore; zero fields take the defaults.
type MemoryStoreOptions struct {
	Clock         imv2.Clock    // default imv2.SystemClock{}
	TTL           time.Duration // lifetime of a file from its Put; default 1 h
	MaxFileBytes  int64         // per file; default 32 MiB
	MaxTotalBytes int64         // all live files; default 256 MiB
	MaxFiles      int           // live files; default 1024
}

// MemoryStore is a bounded in-memory FileStore: a size cap per file, a total
// bytes cap, a count cap and an expiry per file read from the injected
// clock. It starts no goroutine: Put sweeps expired files before checking
// the caps and Open drops an expired file it meets, so there is nothing to
// stop. When a cap would be exceeded Put fails with ErrStoreFull instead of
// evicting a live file whose URL may still be in use.
type MemoryStore struct {
	opts MemoryStoreOptions

	mu    sync.Mutex
	files map[string]*memFile
	total int64
}

type memFile struct {
	channel string
	info    FileInfo
	data    []byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts MemoryStoreOptions) *MemoryStore {
	if opts.Clock == nil {
		opts.Clock = imv2.SystemClock{}
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultFileTTL
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.MaxTotalBytes <= 0 {
		opts.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	return &MemoryStore{opts: opts, files: make(map[string]*memFile)}
}

// Put implements FileStore. It reads at most MaxFileBytes+1 bytes of r, so
// an oversized body costs no more than the cap before ErrFileTooLarge.
func (s *MemoryStore) Put(ctx context.Context, channelID, filename, mimeType string, r io.Reader) (FileInfo, error) {
	if !validChannelID(channelID) {
		return FileInfo{}, imv2.Errorf(imv2.CodeChannelIDRequired, "file store: invalid connector_channel_id")
	}
	data, err := io.ReadAll(io.LimitReader(r, s.opts.MaxFileBytes+1))
	if err != nil {
		return FileInfo{}, err
	}
	if int64(len(data)) > s.opts.MaxFileBytes {
		return FileInfo{}, ErrFileTooLarge
	}
	if err := ctx.Err(); err != nil {
		return FileInfo{}, err
	}
	name := cleanFilename(filename)
	mt := detectMIME(mimeType, name, data[:min(len(data), 512)])
	size := int64(len(data))

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Clock.Now()
	s.sweepLocked(now)
	if len(s.files) >= s.opts.MaxFiles || s.total+size > s.opts.MaxTotalBytes {
		return FileInfo{}, ErrStoreFull
	}
	ref := newFileRef()
	for s.files[ref] != nil { // 128 random bits: never in practice
		ref = newFileRef()
	}
	info := FileInfo{
		FileRef:   ref,
		Type:      FileTypeOf(mt),
		Filename:  name,
		MimeType:  mt,
		ByteSize:  size,
		ExpiresAt: now.Add(s.opts.TTL),
	}
	s.files[ref] = &memFile{channel: channelID, info: info, data: data}
	s.total += size
	return info, nil
}

// Open implements FileStore. The reader reads a private view of bytes that
// are never modified, so it needs no lock.
func (s *MemoryStore) Open(_ context.Context, channelID, fileRef string) (io.ReadCloser, FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.lookupLocked(channelID, fileRef)
	if err != nil {
		return nil, FileInfo{}, err
	}
	return io.NopCloser(bytes.NewReader(f.data)), f.info, nil
}

// Delete implements FileStore.
func (s *MemoryStore) Delete(_ context.Context, channelID, fileRef string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.lookupLocked(channelID, fileRef)
	if errors.Is(err, ErrFileNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.removeLocked(fileRef)
	return nil
}

// Len returns the number of live files and their total bytes.
func (s *MemoryStore) Len() (files int, total int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(s.opts.Clock.Now())
	return len(s.files), s.total
}

func (s *MemoryStore) lookupLocked(channelID, fileRef string) (*memFile, error) {
	f := s.files[fileRef]
	if f == nil {
		return nil, ErrFileNotFound
	}
	if !s.opts.Clock.Now().Before(f.info.ExpiresAt) {
		s.removeLocked(fileRef)
		return nil, ErrFileNotFound
	}
	if f.channel != channelID {
		return nil, ErrWrongChannel
	}
	return f, nil
}

// sweepLocked drops every expired file. At most MaxFiles entries, so a scan
// per Put costs far less than reading the upload itself.
func (s *MemoryStore) sweepLocked(now time.Time) {
	for ref, f := range s.files {
		if !now.Before(f.info.ExpiresAt) {
			s.removeLocked(ref)
		}
	}
}

func (s *MemoryStore) removeLocked(ref string) {
	if f := s.files[ref]; f != nil {
		s.total -= f.info.ByteSize
		delete(s.files, ref)
	}
}
