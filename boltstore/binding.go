package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// Bindings (state.BindingStore) live in two buckets, added to a file
// of layout 1 at open like the claims: an older build ignores them.
//
//	bindings      ch          → JSON of the binding (bindingRecord)
//	binding_keys  key 0x00 ch → empty; the channels of one conversation key
//
// Both change in one transaction, so the count of a key's channels (what
// the kit releases a conversation on) is always the count of its bindings.
var (
	bucketBindings    = []byte("bindings")
	bucketBindingKeys = []byte("binding_keys")
)

var (
	_ state.BindingStore   = (*Store)(nil)
	_ state.BindingUpdater = (*Store)(nil)
)

// bindingRecord is the stored form of a state.Binding. Unknown fields
// are ignored on read, so a later build may add some.
type bindingRecord struct {
	Key         string `json:"key"`
	Provider    string `json:"provider,omitempty"`
	Label       string `json:"label,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
	AccountHint string `json:"account_hint,omitempty"`
	State       string `json:"state"`
	Created     int64  `json:"created_ms"`
	// Data and Drafts came later: a record without them decodes to none.
	// Bytes are base64 in JSON, so any bytes survive exactly.
	Data   []byte        `json:"data,omitempty"`
	Drafts []draftRecord `json:"drafts,omitempty"`
}

// draftRecord is the stored form of a state.DraftHandle.
type draftRecord struct {
	MessageID []byte `json:"message_id"`
	Handle    []byte `json:"handle"`
}

// openBindings makes the binding buckets if the file lacks them, in Open's
// transaction.
func openBindings(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketBindings, bucketBindingKeys} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

func bindingKeyEntry(key, channelID string) []byte {
	return append(append([]byte(key), 0), channelID...)
}

// Bind implements state.BindingStore; the binding is durable when Bind
// returns. Released is decided in the write transaction that moves the
// channel off its old key.
func (s *Store) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	if err := state.CheckBinding(b); err != nil {
		return state.BindingChange{}, err
	}
	v, err := encodeBinding(b)
	if err != nil {
		return state.BindingChange{}, err
	}
	var ch state.BindingChange
	err = s.update(ctx, func(tx *bolt.Tx) error {
		bs, keys := tx.Bucket(bucketBindings), tx.Bucket(bucketBindingKeys)
		old, ok, err := decodeBinding(b.ChannelID, bs.Get([]byte(b.ChannelID)))
		ch = state.BindingChange{Old: old, Had: ok}
		if err != nil {
			return err
		} else if !ok {
			// A new channel: the count is a walk of the bucket, paid only
			// by a new binding, so a file written before the cap needs no
			// migrated counter. A cursor's walk, not Bucket.Stats: Stats
			// reads committed pages only, and this Bind may share its
			// transaction with others (groupcommit.go), whose bindings
			// it must count.
			if n := countKeys(bs); n >= s.bindingCap {
				return imv2.Errorf(imv2.CodeChannelUnavailable, "boltstore: %d bindings, the cap", s.bindingCap)
			}
		} else {
			if err := keys.Delete(bindingKeyEntry(old.Key, b.ChannelID)); err != nil {
				return err
			}
			ch.Released = old.Key != b.Key && !keyBound(keys, old.Key)
		}
		if err := keys.Put(bindingKeyEntry(b.Key, b.ChannelID), []byte{}); err != nil {
			return err
		}
		return bs.Put([]byte(b.ChannelID), v)
	})
	if err != nil {
		return state.BindingChange{}, err
	}
	return ch, nil
}

// encodeBinding returns the stored form of b.
func encodeBinding(b state.Binding) ([]byte, error) {
	r := bindingRecord{
		Key: b.Key, Provider: b.Target.Provider, Label: b.Target.Label, DisplayName: b.Target.DisplayName,
		AccountHint: b.Target.AccountHint, State: string(b.State), Created: b.Created.UnixMilli(), Data: b.Data,
	}
	for _, d := range b.Drafts {
		r.Drafts = append(r.Drafts, draftRecord{MessageID: []byte(d.MessageID), Handle: []byte(d.Handle)})
	}
	return json.Marshal(r)
}

// Update implements state.BindingUpdater: the read, f and the write
// are one write transaction (f runs inside it, so it must not call the
// Store), durable when Update returns. The key does not change, so the
// key index does not either.
func (s *Store) Update(ctx context.Context, channelID string, f func(*state.Binding) error) (state.Binding, bool, error) {
	var (
		old   state.Binding
		found bool
	)
	err := s.updateAlone(ctx, func(tx *bolt.Tx) error {
		bs := tx.Bucket(bucketBindings)
		var err error
		if old, found, err = decodeBinding(channelID, bs.Get([]byte(channelID))); err != nil {
			return err
		} else if !found {
			return errNoChange
		}
		b, err := state.ApplyBindingUpdate(old, f)
		if err != nil {
			return err // rolled back: nothing stored
		}
		v, err := encodeBinding(b)
		if err != nil {
			return err
		}
		return bs.Put([]byte(channelID), v)
	})
	return old, found, err
}

// keyBound reports whether any channel is bound to key, in the
// transaction of keys.
func keyBound(keys *bolt.Bucket, key string) bool {
	prefix := append([]byte(key), 0)
	k, _ := keys.Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}

// Binding implements state.BindingStore.
func (s *Store) Binding(ctx context.Context, channelID string) (state.Binding, bool, error) {
	var (
		b  state.Binding
		ok bool
	)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		b, ok, err = decodeBinding(channelID, tx.Bucket(bucketBindings).Get([]byte(channelID)))
		return err
	})
	return b, ok, err
}

// Unbind implements state.BindingStore. Released is decided in the
// write transaction that removes the binding.
func (s *Store) Unbind(ctx context.Context, channelID string) (state.BindingChange, error) {
	var ch state.BindingChange
	err := s.update(ctx, func(tx *bolt.Tx) error {
		ch = state.BindingChange{}
		bs, keys := tx.Bucket(bucketBindings), tx.Bucket(bucketBindingKeys)
		b, ok, err := decodeBinding(channelID, bs.Get([]byte(channelID)))
		switch {
		case err != nil:
			// A record that no longer decodes is removed all the same
			// (Unbind is how it goes, as in pgstore), its key found
			// from the key index.
			if b.Key, err = keyOfChannel(keys, channelID); err != nil {
				return err
			}
			b.ChannelID = channelID
		case !ok:
			return errNoChange
		}
		if b.Key != "" {
			if err := keys.Delete(bindingKeyEntry(b.Key, channelID)); err != nil {
				return err
			}
		}
		ch = state.BindingChange{Old: b, Had: true, Released: b.Key != "" && !keyBound(keys, b.Key)}
		return bs.Delete([]byte(channelID))
	})
	if err != nil {
		return state.BindingChange{}, err
	}
	return ch, nil
}

// Channels implements state.BindingStore.
func (s *Store) Channels(ctx context.Context, key string) ([]string, error) {
	var ids []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		prefix := append([]byte(key), 0)
		c := tx.Bucket(bucketBindingKeys).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			ids = append(ids, string(k[len(prefix):]))
		}
		return nil
	})
	slices.Sort(ids)
	return ids, err
}

// keyOfChannel finds the conversation key channelID is indexed under: a
// scan of the key index, for a binding record that no longer decodes.
func keyOfChannel(keys *bolt.Bucket, channelID string) (string, error) {
	suffix := append([]byte{0}, channelID...)
	var key string
	err := keys.ForEach(func(k, _ []byte) error {
		if bytes.HasSuffix(k, suffix) {
			key = string(k[:len(k)-len(suffix)])
		}
		return nil
	})
	return key, err
}

func decodeBinding(channelID string, v []byte) (state.Binding, bool, error) {
	if v == nil {
		return state.Binding{}, false, nil
	}
	var r bindingRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return state.Binding{}, false, imv2.Errorf(imv2.CodeInvalidPacket, "boltstore: binding of %q is corrupt: %s", channelID, err)
	}
	b := state.Binding{
		ChannelID: channelID, Key: r.Key, State: state.BindingState(r.State), Created: time.UnixMilli(r.Created),
		Target: protocol.DescriptorTarget{Provider: r.Provider, Label: r.Label, DisplayName: r.DisplayName, AccountHint: r.AccountHint},
		Data:   r.Data,
	}
	for _, d := range r.Drafts {
		b.Drafts = append(b.Drafts, state.DraftHandle{MessageID: string(d.MessageID), Handle: string(d.Handle)})
	}
	if err := state.CheckBinding(b); err != nil {
		return state.Binding{}, false, fmt.Errorf("boltstore: stored binding of %q: %w", channelID, err)
	}
	return b, true, nil
}
