package boltstore

import (
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/state"
)

// The xAgent side's state.ChannelStore (dataplane.ClientConfig.Store):
// the connector_id of the last hello.ack and the channel IDs to reopen,
// in the order added, so an xAgent restarted on the same file reopens its
// channels and, with the same Store as imv2.Options.Pending, resends the
// finals they still owed (S10). Bucket xagent_channels maps an 8-byte
// sequence number to a channel ID, xagent_channel_ids the ID back to its
// number; the connector_id is the xagent_channels key "connector_id" (not
// 8 bytes long, so it never collides with a number). At most
// state.DefaultChannelStoreCap IDs are held: AddChannel beyond that fails
// with code connector_channel_unavailable, as MemoryChannelStore's does.
var (
	bucketXAgentChannels   = []byte("xagent_channels")
	bucketXAgentChannelIDs = []byte("xagent_channel_ids")
	keyXAgentConnectorID   = []byte("connector_id")
)

var _ state.ChannelStore = (*Store)(nil)

func openXAgentChannels(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketXAgentChannels, bucketXAgentChannelIDs} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// ConnectorID implements state.ChannelStore: "" before the first hello.ack.
func (s *Store) ConnectorID(ctx context.Context) (string, error) {
	var id string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketXAgentChannels).Get(keyXAgentConnectorID))
		return nil
	})
	return id, err
}

// SetConnectorID implements state.ChannelStore; durable when it returns.
func (s *Store) SetConnectorID(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketXAgentChannels).Put(keyXAgentConnectorID, []byte(id))
	})
}

// ChannelIDs implements state.ChannelStore: the channels to reopen, in
// the order added.
func (s *Store) ChannelIDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketXAgentChannels).ForEach(func(k, v []byte) error {
			if len(k) == 8 {
				ids = append(ids, string(v))
			}
			return nil
		})
	})
	return ids, err
}

// AddChannel implements state.ChannelStore; adding a held ID is a no-op.
func (s *Store) AddChannel(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		idx := tx.Bucket(bucketXAgentChannelIDs)
		if idx.Get([]byte(id)) != nil {
			return nil
		}
		// Counted by a cursor, not Bucket.Stats: Stats reads committed
		// pages only, and this Add may share its transaction with others
		// (groupcommit.go), whose IDs it must count.
		if n := countKeys(idx); n >= state.DefaultChannelStoreCap {
			return imv2.Errorf(imv2.CodeChannelUnavailable, "boltstore: %d channel IDs held, the cap", n)
		}
		b := tx.Bucket(bucketXAgentChannels)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		k := binary.BigEndian.AppendUint64(nil, seq)
		if err := b.Put(k, []byte(id)); err != nil {
			return err
		}
		return idx.Put([]byte(id), k)
	})
}

// RemoveChannel implements state.ChannelStore; removing an ID not held
// is a no-op.
func (s *Store) RemoveChannel(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		idx := tx.Bucket(bucketXAgentChannelIDs)
		k := idx.Get([]byte(id))
		if k == nil {
			return nil
		}
		if err := tx.Bucket(bucketXAgentChannels).Delete(k); err != nil {
			return err
		}
		return idx.Delete([]byte(id))
	})
}

// countKeys counts b's keys with a cursor, which sees the writes of its
// own transaction.
func countKeys(b *bolt.Bucket) int {
	n, c := 0, b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}
