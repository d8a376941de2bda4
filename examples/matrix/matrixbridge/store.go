package matrixbridge

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
)

// Binding is what the Connector keeps about one channel bound to a Matrix
// room: the account it acts as, the room, and the /sync position. The
// access token is a secret: it is kept here and in memory only, never put
// in a Descriptor, an ack, a log line or a message (Common Protocol §3).
type Binding struct {
	ChannelID   string `json:"channel_id"`
	Homeserver  string `json:"homeserver"`
	UserID      string `json:"user_id"`
	DeviceID    string `json:"device_id,omitempty"`
	AccessToken string `json:"access_token"`
	// OwnDevice is true when the Connector created the device by a
	// password login; auth.logout then logs it out on the homeserver. A
	// token the user pasted is never invalidated by the Connector.
	OwnDevice bool   `json:"own_device,omitempty"`
	RoomID    string `json:"room_id"`
	// Since is the next_batch of the last /sync whose messages were all
	// handed to the Channel; the next /sync starts there.
	Since string `json:"since,omitempty"`
	// Drafts maps the message_id of an assistant message being streamed to
	// the event ID of its temporary Matrix message, so a final that
	// arrives after a Connector restart edits that message instead of
	// posting a second one (M11). At most MaxDraftsPerBinding entries.
	Drafts map[string]string `json:"drafts,omitempty"`
	// DraftOrder lists Drafts' keys, oldest first, for the cap.
	DraftOrder []string `json:"draft_order,omitempty"`
}

// MaxDraftsPerBinding bounds Binding.Drafts; the oldest handle is
// forgotten first (its final, if it ever comes, is posted as a new event).
const MaxDraftsPerBinding = 64

// addDraft records a draft handle within the cap.
func (b *Binding) addDraft(messageID, eventID string) {
	if b.Drafts == nil {
		b.Drafts = map[string]string{}
	}
	if _, ok := b.Drafts[messageID]; !ok {
		b.DraftOrder = append(b.DraftOrder, messageID)
	}
	b.Drafts[messageID] = eventID
	for len(b.DraftOrder) > MaxDraftsPerBinding {
		delete(b.Drafts, b.DraftOrder[0])
		b.DraftOrder = b.DraftOrder[1:]
	}
}

// dropDraft forgets a draft handle; it reports whether there was one.
func (b *Binding) dropDraft(messageID string) bool {
	if _, ok := b.Drafts[messageID]; !ok {
		return false
	}
	delete(b.Drafts, messageID)
	if i := slices.Index(b.DraftOrder, messageID); i >= 0 {
		b.DraftOrder = slices.Delete(b.DraftOrder, i, i+1)
	}
	return true
}

func (b *Binding) clone() Binding {
	c := *b
	if b.Drafts != nil {
		c.Drafts = make(map[string]string, len(b.Drafts))
		for k, v := range b.Drafts {
			c.Drafts[k] = v
		}
	}
	c.DraftOrder = slices.Clone(b.DraftOrder)
	return c
}

// Store keeps the Bindings across restarts. Implementations must be safe
// for concurrent use; Put replaces the binding of its channel.
type Store interface {
	Load(ctx context.Context) ([]Binding, error)
	Put(ctx context.Context, b Binding) error
	Delete(ctx context.Context, channelID string) error
}

// DefaultMaxBindings bounds the channels a store keeps; Put of a new
// channel beyond it fails (a Connector serves at most that many rooms).
const DefaultMaxBindings = 1000

// ErrStoreFull is returned by Put when the store holds DefaultMaxBindings.
var ErrStoreFull = errors.New("matrixbridge: binding store is full")

// MemoryStore is a Store that forgets everything on restart; for tests.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]Binding
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{m: map[string]Binding{}} }

// Load implements Store.
func (s *MemoryStore) Load(context.Context) ([]Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedBindings(s.m), nil
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, b Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[b.ChannelID]; !ok && len(s.m) >= DefaultMaxBindings {
		return ErrStoreFull
	}
	s.m[b.ChannelID] = b.clone()
	return nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(_ context.Context, channelID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, channelID)
	return nil
}

// FileStore is a Store in one JSON file, written with mode 0600 (it holds
// access tokens) and replaced atomically (write to a temporary file, fsync,
// rename) on every change, so a crash leaves the old or the new state,
// never a torn one. It suits a Connector with tens of rooms; each change
// rewrites the whole file.
type FileStore struct {
	path string
	mu   sync.Mutex
	m    map[string]Binding
}

// OpenFileStore reads path, or starts empty when it does not exist.
func OpenFileStore(path string) (*FileStore, error) {
	s := &FileStore{path: path, m: map[string]Binding{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("matrixbridge: read state: %w", err)
	}
	var list []Binding
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("matrixbridge: state file %s is corrupt: %w", path, err)
	}
	for _, b := range list {
		s.m[b.ChannelID] = b
	}
	return s, nil
}

// Load implements Store.
func (s *FileStore) Load(context.Context) ([]Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedBindings(s.m), nil
}

// Put implements Store.
func (s *FileStore) Put(_ context.Context, b Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, existed := s.m[b.ChannelID]
	if !existed && len(s.m) >= DefaultMaxBindings {
		return ErrStoreFull
	}
	s.m[b.ChannelID] = b.clone()
	if err := s.writeLocked(); err != nil {
		if existed {
			s.m[b.ChannelID] = old
		} else {
			delete(s.m, b.ChannelID)
		}
		return err
	}
	return nil
}

// Delete implements Store.
func (s *FileStore) Delete(_ context.Context, channelID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[channelID]
	if !ok {
		return nil
	}
	delete(s.m, channelID)
	if err := s.writeLocked(); err != nil {
		s.m[channelID] = old
		return err
	}
	return nil
}

func (s *FileStore) writeLocked() error {
	data, err := json.MarshalIndent(sortedBindings(s.m), "", "  ")
	if err != nil {
		return fmt.Errorf("matrixbridge: encode state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".matrixbridge-*.tmp")
	if err != nil {
		return fmt.Errorf("matrixbridge: write state: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // no-op after the rename
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("matrixbridge: write state: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("matrixbridge: write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("matrixbridge: write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("matrixbridge: write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("matrixbridge: write state: %w", err)
	}
	return nil
}

func sortedBindings(m map[string]Binding) []Binding {
	out := make([]Binding, 0, len(m))
	for _, b := range m {
		out = append(out, b.clone())
	}
	slices.SortFunc(out, func(a, b Binding) int {
		switch {
		case a.ChannelID < b.ChannelID:
			return -1
		case a.ChannelID > b.ChannelID:
			return 1
		}
		return 0
	})
	return out
}
