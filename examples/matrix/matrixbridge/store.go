package matrixbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Binding is what the Connector keeps about one channel signed in to a
// Matrix room: the account it acts as, the room, the /sync position and
// the handles of drafts being streamed. The connector kit keeps the
// channel's binding to the room (its conversation key); this is the
// Matrix side of it. The access token is a secret: it is kept here and in
// memory only, never put in a Descriptor, an ack, a log line or a message.
type Binding struct {
	ChannelID   string `json:"channel_id"`
	Homeserver  string `json:"homeserver"`
	UserID      string `json:"user_id"`
	DeviceID    string `json:"device_id,omitempty"`
	AccessToken string `json:"access_token"`
	// OwnDevice: the Connector created the device by a password login, so
	// a sign-out logs it out; a pasted token is never invalidated.
	OwnDevice bool   `json:"own_device,omitempty"`
	RoomID    string `json:"room_id"`
	// Since is the next_batch of the last /sync whose messages were all
	// handed to the kit; the next /sync starts there.
	Since string `json:"since,omitempty"`
	// Session is the auth_session_id of the sign-in; Expired is set when
	// the token stopped working.
	Session string `json:"session,omitempty"`
	Expired bool   `json:"expired,omitempty"`
	// Drafts maps the message_id of a reply being streamed to the event
	// ID of its draft, so a final after a restart edits that draft
	// instead of posting a second message (M11); DraftOrder lists its
	// keys, oldest first, for the cap MaxDraftsPerBinding.
	Drafts     map[string]string `json:"drafts,omitempty"`
	DraftOrder []string          `json:"draft_order,omitempty"`
}

// MaxDraftsPerBinding bounds Binding.Drafts, oldest first out.
const MaxDraftsPerBinding = 64

// DefaultMaxBindings bounds the channels a Store keeps (no TTL: they are
// the users' sign-ins, removed by a sign-out or the channel's drop).
const DefaultMaxBindings = 1000

// ErrStoreFull is returned by Put when the store holds DefaultMaxBindings.
var ErrStoreFull = errors.New("matrixbridge: binding store is full")

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

func (b *Binding) dropDraft(messageID string) bool {
	if _, ok := b.Drafts[messageID]; !ok {
		return false
	}
	delete(b.Drafts, messageID)
	b.DraftOrder = slices.DeleteFunc(b.DraftOrder, func(s string) bool { return s == messageID })
	return true
}

func (b Binding) clone() Binding {
	b.Drafts, b.DraftOrder = maps.Clone(b.Drafts), slices.Clone(b.DraftOrder)
	return b
}

// Store keeps the Bindings, in memory (NewMemoryStore) or in one JSON file
// (OpenFileStore) written with mode 0600 — it holds access tokens — and
// replaced atomically on every change (temporary file, fsync, rename), so a
// crash leaves the old or the new state, never a torn one. It suits tens
// of rooms: each change rewrites the file. Safe for concurrent use.
type Store struct {
	path string // "" in memory
	mu   sync.Mutex
	m    map[string]Binding
}

// NewMemoryStore returns an empty Store that forgets everything on restart.
func NewMemoryStore() *Store { return &Store{m: map[string]Binding{}} }

// OpenFileStore reads path, or starts empty when it does not exist.
func OpenFileStore(path string) (*Store, error) {
	s := &Store{path: path, m: map[string]Binding{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	} else if err != nil {
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

// Load returns every binding, sorted by channel.
func (s *Store) Load(context.Context) ([]Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedLocked(), nil
}

// Get returns the channel's binding.
func (s *Store) Get(channelID string) (Binding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[channelID]
	return b.clone(), ok
}

// Put stores b, replacing the binding of its channel.
func (s *Store) Put(_ context.Context, b Binding) error {
	return s.update(b.ChannelID, func(old *Binding) bool { *old = b.clone(); return true })
}

// Delete forgets the channel's binding.
func (s *Store) Delete(_ context.Context, channelID string) error {
	return s.update(channelID, nil)
}

// update changes the channel's binding with f — nil deletes it; a stored
// binding only, unless f is Put's — and writes the file when f reports a
// change. On a write failure the old state stays.
func (s *Store) update(channelID string, f func(b *Binding) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[channelID]
	b := old.clone()
	switch {
	case f == nil:
		delete(s.m, channelID)
	case !ok && len(s.m) >= DefaultMaxBindings:
		return ErrStoreFull
	case !f(&b) || (!ok && b.ChannelID != channelID):
		return nil
	default:
		s.m[channelID] = b
	}
	if err := s.writeLocked(); err != nil {
		if delete(s.m, channelID); ok {
			s.m[channelID] = old
		}
		return fmt.Errorf("matrixbridge: write state: %w", err)
	}
	return nil
}

func (s *Store) writeLocked() error {
	if s.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(s.sortedLocked(), "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".matrixbridge-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, err = tmp.Write(data)
	if err = errors.Join(err, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.path)
}

func (s *Store) sortedLocked() []Binding {
	out := make([]Binding, 0, len(s.m))
	for _, b := range slices.Sorted(maps.Keys(s.m)) {
		out = append(out, s.m[b].clone())
	}
	return out
}
