package connector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/connid"
)

// Defaults of MemoryFileStoreOptions.
const (
	DefaultFileTTL       = time.Hour
	DefaultMaxFileBytes  = 32 << 20
	DefaultMaxTotalBytes = 256 << 20
	DefaultMaxFiles      = 1024
)

// MemoryFileStoreOptions configure NewMemoryFileStore; zero fields take the defaults.
type MemoryFileStoreOptions struct {
	Clock         clock.Clock   // default clock.System{}
	TTL           time.Duration // lifetime of a file from its Put; default 1 h
	MaxFileBytes  int64         // per file; default 32 MiB
	MaxTotalBytes int64         // all live files; default 256 MiB
	MaxFiles      int           // live files; default 1024
	// Of MaxTotalBytes and MaxFiles, uploads (Reserve, xAgent's files)
	// get seven eighths and one channel's uploads an eighth of the files
	// (at least one) and a quarter of the bytes (at least one file of
	// MaxFileBytes); the last eighth is kept for Put, the Connector's own
	// user files, so a peer's uploads cannot make OfferFile fail. Each
	// connector_id's uploads (HandlerConfig.ConnectorOf) are guaranteed a
	// floor of a 256th of the upload share (896 KiB and 3 files with the
	// defaults), for up to 64 connector_ids, and all uploads beyond their
	// floors take at most three quarters of it.
}

// MemoryFileStore is a bounded in-memory FileStore and Reserver: a size cap
// per file, a total bytes cap, a count cap and an expiry per file read from
// the injected clock. A file's bytes are kept in pieces of at most
// memChunk bytes, allocated as they arrive and counted against the caps
// before they are kept, so an upload holds no more memory than it has sent
// and never more than the caps. It starts no goroutine: Put and Reserve
// sweep expired files before checking the caps and Open drops an expired
// file it meets, so there is nothing to stop. When a cap would be exceeded
// Put fails with ErrStoreFull instead of evicting a live file whose URL may
// still be in use.
type MemoryFileStore struct {
	opts MemoryFileStoreOptions

	mu    sync.Mutex
	files map[string]*memFile
	total int64 // bytes of stored files
	q     quota // stored plus reserved
}

type memFile struct {
	channel string
	own     bool // Put's, not an upload's (quota)
	info    FileInfo
	data    [][]byte
}

// memChunk is the largest piece a MemoryFileStore allocates for a file.
const memChunk = 64 << 10

// NewMemoryFileStore returns an empty MemoryFileStore.
func NewMemoryFileStore(opts MemoryFileStoreOptions) *MemoryFileStore {
	if opts.Clock == nil {
		opts.Clock = clock.System{}
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
	return &MemoryFileStore{
		opts:  opts,
		files: make(map[string]*memFile),
		q:     newQuota(opts.MaxTotalBytes, opts.MaxFiles, opts.MaxFileBytes),
	}
}

// Put implements FileStore: Reserve for nothing, then Reservation.Put, so
// the caps are checked as the bytes arrive.
func (s *MemoryFileStore) Put(ctx context.Context, channelID, filename, mimeType string, r io.Reader) (FileInfo, error) {
	return putReserved(ctx, s.reserve, channelID, filename, mimeType, r)
}

// Reserve implements Reserver. It is the Handler's, for xAgent's uploads:
// they get the upload shares of the caps (see the type's doc), the rest is
// kept for Put, the Connector's own user files.
func (s *MemoryFileStore) Reserve(ctx context.Context, channelID string, bytes int64) (Reservation, error) {
	return s.reserve(ctx, channelID, bytes, false)
}

func (s *MemoryFileStore) reserve(ctx context.Context, channelID string, bytes int64, own bool) (Reservation, error) {
	if !validChannelID(channelID) {
		return nil, imv2.Errorf(imv2.CodeChannelIDRequired, "file store: invalid connector_channel_id")
	}
	bytes = max(0, min(bytes, s.opts.MaxFileBytes))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(s.opts.Clock.Now())
	if !s.q.take(channelID, connid.ConnectorID(ctx), bytes, own) {
		return nil, ErrStoreFull
	}
	return &memReservation{s: s, channel: channelID, h: hold{mu: &s.mu, q: &s.q, ch: channelID, own: own, held: bytes, maxFile: s.opts.MaxFileBytes}}, nil
}

type memReservation struct {
	s       *MemoryFileStore
	channel string
	h       hold
	used    bool
}

// Put implements Reservation.
func (m *memReservation) Put(ctx context.Context, filename, mimeType string, r io.Reader) (FileInfo, error) {
	if m.used {
		return FileInfo{}, errors.New("file store: reservation already used")
	}
	m.used = true
	var data [][]byte
	size, head, err := fill(ctx, &m.h, r, make([]byte, memChunk), func(p []byte) error {
		data = append(data, bytes.Clone(p)) // exact size: no slack kept
		return nil
	})
	if err != nil {
		return FileInfo{}, err
	}
	name := cleanFilename(filename)
	mt := detectMIME(mimeType, name, head)

	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Clock.Now()
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
	s.files[ref] = &memFile{channel: m.channel, own: m.h.own, info: info, data: data}
	s.total += size
	m.h.keepLocked(size)
	return info, nil
}

// Release implements Reservation.
func (m *memReservation) Release() { m.h.release() }

// Open implements FileStore. The reader reads a private view of bytes that
// are never modified, so it needs no lock.
func (s *MemoryFileStore) Open(_ context.Context, channelID, fileRef string) (io.ReadCloser, FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.lookupLocked(channelID, fileRef)
	if err != nil {
		return nil, FileInfo{}, err
	}
	rs := make([]io.Reader, len(f.data))
	for i, p := range f.data {
		rs[i] = bytes.NewReader(p)
	}
	return io.NopCloser(io.MultiReader(rs...)), f.info, nil
}

// Delete implements FileStore.
func (s *MemoryFileStore) Delete(_ context.Context, channelID, fileRef string) error {
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
func (s *MemoryFileStore) Len() (files int, total int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(s.opts.Clock.Now())
	return len(s.files), s.total
}

func (s *MemoryFileStore) lookupLocked(channelID, fileRef string) (*memFile, error) {
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
// per Put or Reserve costs far less than reading the upload itself.
func (s *MemoryFileStore) sweepLocked(now time.Time) {
	for ref, f := range s.files {
		if !now.Before(f.info.ExpiresAt) {
			s.removeLocked(ref)
		}
	}
}

func (s *MemoryFileStore) removeLocked(ref string) {
	if f := s.files[ref]; f != nil {
		s.total -= f.info.ByteSize
		s.q.add(f.channel, f.own, -f.info.ByteSize, -1)
		delete(s.files, ref)
	}
}
