//go:build !unix

package connector

import "os"

// lockDir does not lock on this platform: one process at a time must use
// a kept store's Dir (DiskFileStoreOptions.Keep).
func lockDir(string) (*os.File, error) { return nil, nil }

// syncDir is a no-op here: directories cannot be synced on every platform.
func syncDir(string) error { return nil }

// openNoFollow is os.Open here; Open's same-file check still refuses a
// file swapped in under a stored file's name.
func openNoFollow(path string) (*os.File, error) { return os.Open(path) }

// isSymlinkErr reports false: openNoFollow follows symlinks here.
func isSymlinkErr(error) bool { return false }
