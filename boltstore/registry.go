package boltstore

import (
	"context"

	bolt "go.etcd.io/bbolt"
)

// bucketChannels holds the channel IDs a Connector issued (channel ID →
// empty), so a restart reuses them (state.ChannelRegistry). It is
// created on first use, so version-1 files without it stay valid.
var bucketChannels = []byte("channels")

// Known reports whether channelID was registered (state.ChannelRegistry).
func (s *Store) Known(ctx context.Context, channelID string) (bool, error) {
	if err := checkChannel(channelID); err != nil {
		return false, err
	}
	found := false
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketChannels); b != nil {
			found = b.Get([]byte(channelID)) != nil
		}
		return nil
	})
	return found, err
}

// Register records a channel ID the Connector issued; it is durable when
// Register returns.
func (s *Store) Register(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketChannels)
		if err != nil {
			return err
		}
		return b.Put([]byte(channelID), []byte{})
	})
}

// Forget removes a channel ID the Connector dropped for good, with the
// channel's pending entries (S7). Its completed records stay until
// CompletedTTL or CompletedCap takes them, so a resend under the ID that
// replaces it is still answered duplicate (see imv2.Channel.Drop).
func (s *Store) Forget(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	if err := s.update(ctx, func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketChannels); b != nil {
			return b.Delete([]byte(channelID))
		}
		return nil
	}); err != nil {
		return err
	}
	return s.DropPending(ctx, channelID)
}
