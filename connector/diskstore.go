package connector

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
)

// DiskStoreOptions configure NewDiskStore; zero fields take the defaults
// of MemoryStoreOptions.
type DiskStoreOptions struct {
	// Dir is where the store makes its own private directory (mode 0700);
	// default os.TempDir(). The directory and every file in it are removed
	// by Close.
	Dir           string
	Clock         clock.Clock   // default clock.System{}
	TTL           time.Duration // lifetime of a file from its Put; default 1 h
	MaxFileBytes  int64         // per file; default 32 MiB
	MaxTotalBytes int64         // all live and reserved files; default 256 MiB
	MaxFiles      int           // live and reserved files; default 1024
}

// DiskStore is a FileStore and Reserver that keeps file bytes in files on
// disk and only their metadata in memory, so large files do not live in
// RAM: an upload in flight holds one copy buffer (diskCopyBuf bytes). It
// has the MemoryStore's caps, counted as the bytes arrive, and its expiry;
// like it, it starts no goroutine (expired files are removed on Put,
// Reserve and Open). The files are temporary: Close removes them all, and a
// new DiskStore never reads an old directory.
type DiskStore struct {
	opts DiskStoreOptions
	dir  string

	mu     sync.Mutex
	files  map[string]*diskFile
	total  int64
	q      quota
	closed bool
}

type diskFile struct {
	channel string
	info    FileInfo
}

// diskCopyBuf is the buffer one upload into a DiskStore uses.
const diskCopyBuf = 32 << 10

// NewDiskStore makes a private directory under opts.Dir and returns an
// empty DiskStore keeping its files there.
func NewDiskStore(opts DiskStoreOptions) (*DiskStore, error) {
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
	dir, err := os.MkdirTemp(opts.Dir, "connector-files-") // mode 0700
	if err != nil {
		return nil, errors.New("connector: disk store: " + err.Error())
	}
	return &DiskStore{
		opts:  opts,
		dir:   dir,
		files: make(map[string]*diskFile),
		q:     quota{maxBytes: opts.MaxTotalBytes, maxFiles: opts.MaxFiles},
	}, nil
}

// Dir returns the store's private directory.
func (s *DiskStore) Dir() string { return s.dir }

// Close removes every file and the directory; later calls fail with
// imv2.ErrClosed. A download already open keeps reading its file (the
// name goes, the open file stays until the reader is closed, on Unix).
func (s *DiskStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.files = map[string]*diskFile{}
	s.total = 0
	return os.RemoveAll(s.dir)
}

// Put implements FileStore: Reserve for nothing, then Reservation.Put, so
// the caps are checked as the bytes arrive.
func (s *DiskStore) Put(ctx context.Context, channelID, filename, mimeType string, r io.Reader) (FileInfo, error) {
	res, err := s.Reserve(ctx, channelID, 0)
	if err != nil {
		return FileInfo{}, err
	}
	defer res.Release()
	return res.Put(ctx, filename, mimeType, r)
}

// Reserve implements Reserver.
func (s *DiskStore) Reserve(_ context.Context, channelID string, bytes int64) (Reservation, error) {
	if !validChannelID(channelID) {
		return nil, imv2.Errorf(imv2.CodeChannelIDRequired, "file store: invalid connector_channel_id")
	}
	bytes = max(0, min(bytes, s.opts.MaxFileBytes))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, imv2.ErrClosed
	}
	s.sweepLocked(s.opts.Clock.Now())
	if !s.q.take(bytes) {
		return nil, ErrStoreFull
	}
	// The ref is drawn now so the file can be written under its final
	// name; it is not in the map, so not visible, until Put completes.
	ref := newFileRef()
	for s.files[ref] != nil {
		ref = newFileRef()
	}
	return &diskReservation{s: s, channel: channelID, ref: ref, h: hold{mu: &s.mu, q: &s.q, held: bytes, maxFile: s.opts.MaxFileBytes}}, nil
}

type diskReservation struct {
	s       *DiskStore
	channel string
	ref     string
	h       hold
	used    bool
}

// Put implements Reservation.
func (d *diskReservation) Put(ctx context.Context, filename, mimeType string, r io.Reader) (_ FileInfo, err error) {
	if d.used {
		return FileInfo{}, errors.New("file store: reservation already used")
	}
	d.used = true
	s := d.s
	path := filepath.Join(s.dir, d.ref) // the ref alphabet has no separator or dot
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return FileInfo{}, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	size, head, err := fill(ctx, &d.h, r, make([]byte, diskCopyBuf), func(p []byte) error {
		_, err := f.Write(p)
		return err
	})
	if err != nil {
		return FileInfo{}, err
	}
	name := cleanFilename(filename)
	mt := detectMIME(mimeType, name, head)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return FileInfo{}, imv2.ErrClosed
	}
	info := FileInfo{
		FileRef:   d.ref,
		Type:      FileTypeOf(mt),
		Filename:  name,
		MimeType:  mt,
		ByteSize:  size,
		ExpiresAt: s.opts.Clock.Now().Add(s.opts.TTL),
	}
	s.files[d.ref] = &diskFile{channel: d.channel, info: info}
	s.total += size
	d.h.keepLocked(size)
	return info, nil
}

// Release implements Reservation.
func (d *diskReservation) Release() { d.h.release() }

// Open implements FileStore.
func (s *DiskStore) Open(_ context.Context, channelID, fileRef string) (io.ReadCloser, FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.lookupLocked(channelID, fileRef)
	if err != nil {
		return nil, FileInfo{}, err
	}
	rc, err := os.Open(filepath.Join(s.dir, fileRef))
	if err != nil {
		return nil, FileInfo{}, err
	}
	return rc, f.info, nil
}

// Delete implements FileStore.
func (s *DiskStore) Delete(_ context.Context, channelID, fileRef string) error {
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
func (s *DiskStore) Len() (files int, total int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(s.opts.Clock.Now())
	return len(s.files), s.total
}

func (s *DiskStore) lookupLocked(channelID, fileRef string) (*diskFile, error) {
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

func (s *DiskStore) sweepLocked(now time.Time) {
	for ref, f := range s.files {
		if !now.Before(f.info.ExpiresAt) {
			s.removeLocked(ref)
		}
	}
}

func (s *DiskStore) removeLocked(ref string) {
	if f := s.files[ref]; f != nil {
		s.total -= f.info.ByteSize
		s.q.bytes -= f.info.ByteSize
		s.q.files--
		delete(s.files, ref)
		_ = os.Remove(filepath.Join(s.dir, ref))
	}
}
