//go:build !unix

package connector

import "os"

// lockDir does not lock on this platform: one process at a time must use
// a kept store's Dir (DiskStoreOptions.Keep).
func lockDir(string) (*os.File, error) { return nil, nil }

// syncDir is a no-op here: directories cannot be synced on every platform.
func syncDir(string) error { return nil }
