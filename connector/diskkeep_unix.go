//go:build unix

package connector

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes the lock of a kept store's directory, held until the
// returned file is closed (or the process ends, as after a crash): a
// second store on the same Dir, in this process or another, would take up
// and remove the first one's files in flight.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("the directory is in use by another DiskFileStore")
		}
		return nil, err
	}
	return f, nil
}

// syncDir makes a rename in dir durable across a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// openNoFollow opens path for reading without following a symlink there.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// isSymlinkErr reports whether openNoFollow failed on a symlink.
func isSymlinkErr(err error) bool { return errors.Is(err, syscall.ELOOP) }
