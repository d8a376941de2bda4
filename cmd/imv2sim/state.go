package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/state"
)

// simState is imv2sim's durable xAgent side (-state FILE): the pending
// finals and the completed user messages in a boltstore file at FILE, and
// the connector_id and channel to reopen in FILE.channels, so a restart
// neither loses a final the Connector had not acked (S1) nor runs a user
// message it already took (S8).
type simState struct {
	bolt     *boltstore.Store
	channels *fileChannelStore
}

func openState(path string) (*simState, error) {
	channels, err := openFileChannelStore(path + ".channels")
	if err != nil {
		return nil, err
	}
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		return nil, err
	}
	return &simState{bolt: st, channels: channels}, nil
}

func (s *simState) Close() error { return s.bolt.Close() }

// fileChannelStore is a state.ChannelStore in a small JSON file, rewritten
// whole (temporary file, fsync, rename) on every change: it changes once
// per connect or channel, not per message.
type fileChannelStore struct {
	path string
	mu   sync.Mutex
	data channelFile
}

// channelFile is the file's content.
type channelFile struct {
	ConnectorID string   `json:"connector_id,omitempty"`
	Channels    []string `json:"channels,omitempty"`
}

var _ state.ChannelStore = (*fileChannelStore)(nil)

func openFileChannelStore(path string) (*fileChannelStore, error) {
	s := &fileChannelStore{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &s.data); err != nil {
		return nil, fmt.Errorf("state %s: %w", path, err)
	}
	return s, nil
}

func (s *fileChannelStore) ConnectorID(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data.ConnectorID, nil
}

func (s *fileChannelStore) SetConnectorID(_ context.Context, id string) error {
	return s.change(func(d *channelFile) bool {
		if d.ConnectorID == id {
			return false
		}
		d.ConnectorID = id
		return true
	})
}

func (s *fileChannelStore) ChannelIDs(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.data.Channels), nil
}

func (s *fileChannelStore) AddChannel(_ context.Context, id string) error {
	s.mu.Lock()
	full := len(s.data.Channels) >= state.DefaultChannelStoreCap && !slices.Contains(s.data.Channels, id)
	s.mu.Unlock()
	if full { // the Client's own bound on channels: not reached by one simulator
		return imv2.Errorf(imv2.CodeChannelUnavailable, "state %s holds %d channels, its cap", s.path, state.DefaultChannelStoreCap)
	}
	return s.change(func(d *channelFile) bool {
		if slices.Contains(d.Channels, id) {
			return false
		}
		d.Channels = append(d.Channels, id)
		return true
	})
}

func (s *fileChannelStore) RemoveChannel(_ context.Context, id string) error {
	return s.change(func(d *channelFile) bool {
		i := slices.Index(d.Channels, id)
		if i < 0 {
			return false
		}
		d.Channels = slices.Delete(d.Channels, i, i+1)
		return true
	})
}

// change applies f and, when it changed something, writes the file; a
// failed write leaves the memory as it was.
func (s *fileChannelStore) change(f func(*channelFile) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := channelFile{ConnectorID: s.data.ConnectorID, Channels: slices.Clone(s.data.Channels)}
	if !f(&d) {
		return nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := writeFileSync(s.path, b); err != nil {
		return err
	}
	s.data = d
	return nil
}

// writeFileSync replaces path with b so that a crash leaves the old or the
// new content, never a torn file.
func writeFileSync(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
