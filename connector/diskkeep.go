package connector

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xagentkit/imv2"
)

// A DiskFileStore with Keep writes, beside each file's bytes (named by its
// ref), a record of its metadata (ref + metaSuffix), written whole to a
// temporary name and renamed, after the bytes were synced; NewDiskFileStore
// takes up a file only when both are there and agree. Removing a file
// unlinks its record first, so a crash in between leaves bytes without a
// record, which the next load removes.

// metaSuffix names a file's metadata record; no ref has a dot.
const metaSuffix = ".meta"

// lockName is the lock file of a kept store's directory (lockDir).
const lockName = ".lock"

// diskMeta is a file's metadata record, with names of its own: renaming a
// FileInfo field must not make a load forget every kept file.
type diskMeta struct {
	Channel   string        `json:"channel"`
	Own       bool          `json:"own,omitempty"` // the Connector's own file (Put), not an upload
	FileRef   string        `json:"file_ref"`
	Type      imv2.FileType `json:"type"`
	Filename  string        `json:"filename"`
	MimeType  string        `json:"mime_type"`
	ByteSize  int64         `json:"byte_size"`
	ExpiresAt time.Time     `json:"expires_at"`
}

func (m *diskMeta) info() FileInfo {
	return FileInfo{FileRef: m.FileRef, Type: m.Type, Filename: m.Filename, MimeType: m.MimeType, ByteSize: m.ByteSize, ExpiresAt: m.ExpiresAt}
}

// writeMeta writes the record of the file at path, durably: whole under a
// temporary name, synced, renamed, and the rename synced.
func writeMeta(path, channelID string, own bool, info FileInfo) error {
	b, err := json.Marshal(diskMeta{Channel: channelID, Own: own, FileRef: info.FileRef, Type: info.Type, Filename: info.Filename,
		MimeType: info.MimeType, ByteSize: info.ByteSize, ExpiresAt: info.ExpiresAt})
	if err != nil {
		return err
	}
	tmp := path + metaSuffix + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path+metaSuffix)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// load takes up the live files of s.dir, counted against the caps as
// they were put (a lowered cap refuses new files until enough expire),
// and removes what is expired or half-written, as far as it can. Names
// the store does not make, and anything but regular files (a symlink), are
// left alone; an expiry beyond TTL from now is cut to it.
func (s *DiskFileStore) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	now := s.opts.Clock.Now()
	var stray []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if ref, ok := strings.CutSuffix(name, metaSuffix+".tmp"); ok && isStoreRef(ref) {
			stray = append(stray, name) // the record of a write that crashed
			continue
		}
		ref, ok := strings.CutSuffix(name, metaSuffix)
		if !ok || !isStoreRef(ref) {
			continue // bytes (kept if a record names them, below), or not the store's
		}
		m, ok := readMeta(filepath.Join(s.dir, name), ref)
		var st fs.FileInfo
		if ok && now.Before(m.ExpiresAt) {
			st, ok = s.sizeIs(ref, m.ByteSize)
		}
		if !ok || !now.Before(m.ExpiresAt) {
			stray = append(stray, name, ref)
			continue
		}
		info := m.info()
		if latest := now.Add(s.opts.TTL); info.ExpiresAt.After(latest) {
			info.ExpiresAt = latest
		}
		s.files[ref] = &diskFile{channel: m.Channel, own: m.Own, info: info, stat: st}
		s.total += info.ByteSize
		s.q.add(m.Channel, m.Own, info.ByteSize, 1)
	}
	for _, e := range entries {
		if name := e.Name(); e.Type().IsRegular() && isStoreRef(name) && s.files[name] == nil {
			stray = append(stray, name) // bytes without a record
		}
	}
	for _, name := range stray {
		_ = os.Remove(filepath.Join(s.dir, name)) // what stays is not taken up: no harm but its bytes
	}
	return nil
}

// isStoreRef reports whether name is a ref newFileRef makes.
func isStoreRef(name string) bool {
	hexPart, ok := strings.CutPrefix(name, refPrefix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil && strings.ToLower(hexPart) == hexPart
}

// readMeta reads the record at path of file ref; ok is false for one that
// does not parse or names another file or an invalid channel.
func readMeta(path, ref string) (diskMeta, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return diskMeta{}, false
	}
	var m diskMeta
	if json.Unmarshal(b, &m) != nil || m.FileRef != ref || !validChannelID(m.Channel) || m.ByteSize < 0 {
		return diskMeta{}, false
	}
	return m, true
}

// sizeIs reports whether the bytes of file ref are on disk, size of them,
// and returns the file's stat (Open serves that file only).
func (s *DiskFileStore) sizeIs(ref string, size int64) (fs.FileInfo, bool) {
	fi, err := os.Lstat(filepath.Join(s.dir, ref))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		return nil, false
	}
	return fi, true
}

// keepDir makes a kept store's directory, or takes up the one there: a
// directory itself (not a symlink to one), made private (0700) if it was
// open to others, so no other user reads the files or swaps them.
func keepDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New(dir + " is not a directory (a symlink is refused)")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return errors.New("cannot make " + dir + " private: " + err.Error())
		}
	}
	return nil
}
