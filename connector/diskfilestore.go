package connector

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/connid"
)

// DiskFileStoreOptions configure NewDiskFileStore; zero fields take the defaults
// of MemoryFileStoreOptions.
type DiskFileStoreOptions struct {
	// Dir is where the store makes its own private directory (mode 0700);
	// default os.TempDir(). The directory and every file in it are removed
	// by Close. With Keep, Dir itself is the store's directory (required):
	// made private (0700) if it was open to others; a symlink is refused.
	Dir string
	// Keep makes the files outlive the process, a crash and a power loss:
	// each file's metadata is written beside its bytes, both synced before
	// Put returns; NewDiskFileStore takes up the live files it finds in Dir
	// (and removes expired and half-written ones), and Close leaves them.
	// A restarted Connector then still serves the download_url of a user
	// message resent after the restart. One store at a time may use a Dir:
	// a second fails while the first is open (a lock, on Unix).
	Keep          bool
	Clock         clock.Clock   // default clock.System{}
	TTL           time.Duration // lifetime of a file from its Put; default 1 h
	MaxFileBytes  int64         // per file; default 32 MiB
	MaxTotalBytes int64         // all live and reserved files; default 256 MiB
	MaxFiles      int           // live and reserved files; default 1024
	// The caps are shared between uploads and the Connector's own files
	// as MemoryFileStoreOptions says.
}

// DiskFileStore is a FileStore and Reserver that keeps file bytes in files on
// disk and only their metadata in memory, so large files do not live in
// RAM: an upload in flight holds one copy buffer (diskCopyBuf bytes). It
// has the MemoryFileStore's caps, counted as the bytes arrive, and its expiry;
// like it, it starts no goroutine (expired files are removed on Put,
// Reserve and Open). The files are temporary — Close removes them all, and
// a new DiskFileStore never reads an old directory — unless Keep is set.
type DiskFileStore struct {
	opts DiskFileStoreOptions
	dir  string
	lock *os.File // Keep: held until Close (lockDir)

	// remove and open are os.Remove and openNoFollow; tests replace them
	// to show that neither runs under mu.
	remove func(path string) error
	open   func(path string) (*os.File, error)

	// mu guards the metadata only: files are created, opened and unlinked
	// outside it, so a slow disk delays the caller doing the I/O, not every
	// other Put, Open and Delete (Close alone removes the directory under
	// it, being the last call).
	mu     sync.Mutex
	files  map[string]*diskFile
	total  int64
	q      quota
	closed bool
}

type diskFile struct {
	channel string
	own     bool // Put's, not an upload's (quota)
	info    FileInfo
	// stat is the file as it was written (or found by load): Open serves
	// only that same file, so one swapped in under its name (a symlink to
	// /etc/passwd, another file) is not served through its signed URL.
	stat fs.FileInfo
}

// diskCopyBuf is the buffer one upload into a DiskFileStore uses.
const diskCopyBuf = 32 << 10

// NewDiskFileStore makes a private directory under opts.Dir and returns an
// empty DiskFileStore keeping its files there.
func NewDiskFileStore(opts DiskFileStoreOptions) (*DiskFileStore, error) {
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
	dir := opts.Dir
	var err error
	switch {
	case opts.Keep && dir == "":
		return nil, errors.New("connector: disk store: Keep needs a Dir")
	case opts.Keep:
		err = keepDir(dir)
	default:
		dir, err = os.MkdirTemp(opts.Dir, "connector-files-") // mode 0700
	}
	if err != nil {
		return nil, errors.New("connector: disk store: " + err.Error())
	}
	s := &DiskFileStore{
		opts:   opts,
		dir:    dir,
		remove: os.Remove,
		open:   openNoFollow,
		files:  make(map[string]*diskFile),
		q:      newQuota(opts.MaxTotalBytes, opts.MaxFiles, opts.MaxFileBytes),
	}
	if opts.Keep {
		if s.lock, err = lockDir(dir); err == nil {
			err = s.load()
		}
		if err != nil {
			if s.lock != nil {
				s.lock.Close()
			}
			return nil, errors.New("connector: disk store: " + err.Error())
		}
	}
	return s, nil
}

// Dir returns the store's private directory.
func (s *DiskFileStore) Dir() string { return s.dir }

// Close removes every file and the directory, unless Keep is set; later
// calls fail with imv2.ErrClosed. A download already open keeps reading
// its file (the name goes, the open file stays until the reader is
// closed, on Unix).
func (s *DiskFileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.files = map[string]*diskFile{}
	s.total = 0
	if s.opts.Keep {
		if s.lock == nil {
			return nil
		}
		return s.lock.Close()
	}
	return os.RemoveAll(s.dir)
}

// Put implements FileStore: Reserve for nothing, then Reservation.Put, so
// the caps are checked as the bytes arrive.
func (s *DiskFileStore) Put(ctx context.Context, channelID, filename, mimeType string, r io.Reader) (FileInfo, error) {
	return putReserved(ctx, s.reserve, channelID, filename, mimeType, r)
}

// Reserve implements Reserver. It is the Handler's, for xAgent's uploads:
// they get the upload shares of the caps (see the type's doc), the rest is
// kept for Put, the Connector's own user files.
func (s *DiskFileStore) Reserve(ctx context.Context, channelID string, bytes int64) (Reservation, error) {
	return s.reserve(ctx, channelID, bytes, false)
}

func (s *DiskFileStore) reserve(ctx context.Context, channelID string, bytes int64, own bool) (Reservation, error) {
	if !validChannelID(channelID) {
		return nil, imv2.Errorf(imv2.CodeChannelIDRequired, "file store: invalid connector_channel_id")
	}
	bytes = max(0, min(bytes, s.opts.MaxFileBytes))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, imv2.ErrClosed
	}
	expired := s.sweepLocked(s.opts.Clock.Now())
	if !s.q.take(channelID, connid.ConnectorID(ctx), bytes, own) {
		s.mu.Unlock()
		s.unlink(expired)
		return nil, ErrStoreFull
	}
	// The ref is drawn now so the file can be written under its final
	// name; it is not in the map, so not visible, until Put completes.
	// 128 random bits: it is not the name of a file whose unlink is
	// still to come.
	ref := newFileRef()
	for s.files[ref] != nil {
		ref = newFileRef()
	}
	s.mu.Unlock()
	s.unlink(expired)
	return &diskReservation{s: s, channel: channelID, ref: ref, h: hold{mu: &s.mu, q: &s.q, ch: channelID, own: own, held: bytes, maxFile: s.opts.MaxFileBytes}}, nil
}

type diskReservation struct {
	s       *DiskFileStore
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
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed { // no file written for nothing (checked again before it is published)
		return FileInfo{}, imv2.ErrClosed
	}
	path := filepath.Join(s.dir, d.ref) // the ref alphabet has no separator or dot
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return FileInfo{}, err
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		if err != nil {
			if s.opts.Keep {
				_ = os.Remove(path + metaSuffix)
			}
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
	info := FileInfo{
		FileRef:   d.ref,
		Type:      FileTypeOf(mt),
		Filename:  name,
		MimeType:  mt,
		ByteSize:  size,
		ExpiresAt: s.opts.Clock.Now().Add(s.opts.TTL),
	}
	if s.opts.Keep {
		err = f.Sync() // the bytes on disk first, then the record that names them
	}
	var st fs.FileInfo
	if err == nil {
		st, err = f.Stat()
	}
	if cerr := f.Close(); err == nil { // before it is published: a failed close unpublishes nothing
		err = cerr
	}
	f = nil
	if err == nil && s.opts.Keep {
		err = writeMeta(path, d.channel, d.h.own, info)
	}
	if err != nil {
		return FileInfo{}, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return FileInfo{}, imv2.ErrClosed
	}
	s.files[d.ref] = &diskFile{channel: d.channel, own: d.h.own, info: info, stat: st}
	s.total += size
	d.h.keepLocked(size)
	return info, nil
}

// Release implements Reservation.
func (d *diskReservation) Release() { d.h.release() }

// Open implements FileStore. The file is opened after the lookup, outside
// the lock: if it is deleted or expires in between, its name is gone and
// Open reports ErrFileNotFound; once open, the reader keeps its bytes (on
// Unix an open file outlives its unlink). It is opened without following
// a symlink and served only if it is the very file that was stored (same
// file, same size): anything else under its name is ErrFileNotFound.
func (s *DiskFileStore) Open(_ context.Context, channelID, fileRef string) (io.ReadCloser, FileInfo, error) {
	s.mu.Lock()
	f, expired, err := s.lookupLocked(channelID, fileRef)
	var info FileInfo
	var want fs.FileInfo
	if f != nil {
		info, want = f.info, f.stat
	}
	s.mu.Unlock()
	s.unlink(expired)
	if err != nil {
		return nil, FileInfo{}, err
	}
	rc, err := s.open(filepath.Join(s.dir, fileRef))
	if errors.Is(err, fs.ErrNotExist) || isSymlinkErr(err) {
		return nil, FileInfo{}, ErrFileNotFound
	}
	if err != nil {
		return nil, FileInfo{}, err
	}
	if got, err := rc.Stat(); err != nil || !got.Mode().IsRegular() || got.Size() != info.ByteSize || !sameFile(want, got) {
		_ = rc.Close()
		return nil, FileInfo{}, ErrFileNotFound
	}
	return rc, info, nil
}

// sameFile reports whether got is the file want was stat'ed from: the same
// inode and the same modification time (an inode number is reused once
// the stored file is unlinked; a new file's time is not the old one's).
func sameFile(want, got fs.FileInfo) bool {
	return want == nil || (os.SameFile(want, got) && got.ModTime().Equal(want.ModTime()))
}

// Delete implements FileStore.
func (s *DiskFileStore) Delete(_ context.Context, channelID, fileRef string) error {
	s.mu.Lock()
	_, expired, err := s.lookupLocked(channelID, fileRef)
	var gone []string
	if err == nil {
		gone = s.removeLocked(fileRef, nil)
	}
	s.mu.Unlock()
	s.unlink(expired)
	s.unlink(gone)
	if errors.Is(err, ErrFileNotFound) {
		return nil
	}
	return err
}

// Len returns the number of live files and their total bytes.
func (s *DiskFileStore) Len() (files int, total int64) {
	s.mu.Lock()
	expired := s.sweepLocked(s.opts.Clock.Now())
	files, total = len(s.files), s.total
	s.mu.Unlock()
	s.unlink(expired)
	return files, total
}

// lookupLocked returns the live file fileRef of channelID. An expired one
// is forgotten and its path returned, to be unlinked after unlocking.
func (s *DiskFileStore) lookupLocked(channelID, fileRef string) (*diskFile, []string, error) {
	f := s.files[fileRef]
	if f == nil {
		return nil, nil, ErrFileNotFound
	}
	if !s.opts.Clock.Now().Before(f.info.ExpiresAt) {
		return nil, s.removeLocked(fileRef, nil), ErrFileNotFound
	}
	if f.channel != channelID {
		return nil, nil, ErrWrongChannel
	}
	return f, nil, nil
}

// sweepLocked forgets every expired file and returns their paths, to be
// unlinked after unlocking.
func (s *DiskFileStore) sweepLocked(now time.Time) []string {
	var paths []string
	for ref, f := range s.files {
		if !now.Before(f.info.ExpiresAt) {
			paths = s.removeLocked(ref, paths)
		}
	}
	return paths
}

// removeLocked forgets file ref, frees its quota and appends its path to
// paths: the unlink is the caller's, after unlocking. Its name is not
// reused meanwhile (refs are random), and an Open that looks it up later
// finds it unknown.
func (s *DiskFileStore) removeLocked(ref string, paths []string) []string {
	if f := s.files[ref]; f != nil {
		s.total -= f.info.ByteSize
		s.q.add(f.channel, f.own, -f.info.ByteSize, -1)
		delete(s.files, ref)
		if s.opts.Keep { // the record first: a file left without one is removed by the next load
			paths = append(paths, filepath.Join(s.dir, ref+metaSuffix))
		}
		paths = append(paths, filepath.Join(s.dir, ref))
	}
	return paths
}

// unlink removes the files removeLocked forgot; it runs without the lock.
// A file already gone (Close removed the directory) is no error worth
// reporting: its bytes are gone either way.
func (s *DiskFileStore) unlink(paths []string) {
	for _, p := range paths {
		_ = s.remove(p)
	}
}
