package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
)

// LayoutVersion is the version of the bucket layout and value encodings this
// build writes and reads. It is stored in the meta bucket as layout_version.
//
// How a migration plugs in: bump LayoutVersion, and add a case to migrate
// that rewrites a file of version N to N+1 inside the transaction it is
// given. Open runs every step from the file's version up to LayoutVersion in
// the one transaction that also writes the new layout_version, so a crash
// mid-migration leaves the old file intact. A file with a version above
// LayoutVersion was written by a newer build; Open refuses it rather than
// guess (ErrLayoutVersion).
const LayoutVersion = 4

// Bucket layout, version 4. key(ch, id) is the channel ID, one 0x00 byte and
// the message ID; channel IDs may not contain 0x00, so the first 0x00 splits
// a key and "ch"+0x00 is a prefix of exactly one channel's keys.
// seq is a bucket sequence number and t a time in sortable form (timeKey),
// both 8 bytes big-endian so byte order is number order.
//
//	meta            "layout_version"  → uint64
//	                "completed_count" → uint64, records in "completed"
//	                "completed_channels" → uint64, keys of "completed_counts"
//	                "completed_groups" → uint64, keys of "completed_groups"
//	pending         ch 0x00 seq       → entry (internal/pendingcodec v1); seq gives Add order
//	pending_ids     key(ch, id)       → seq ‖ fingerprint (32)
//	pending_count   ch                → uint64, entries of the channel
//	completed       key(ch, id)       → t ‖ seq ‖ fingerprint (32)
//	completed_order t ‖ seq           → key(ch, id); oldest first, for
//	                                    eviction and the TTL sweep
//	completed_by_channel ch 0x00 t ‖ seq → id; each channel's oldest
//	                                    first, for eviction by shares
//	completed_counts ch               → uint64 ‖ connector_id, records of
//	                                    the channel and its group
//	completed_groups 'g' connector_id → uint64 ‖ uint64, records and
//	                                    channels of the group
//	completed_results key(ch, id)     → result (at most state.MaxResultBytes)
//	                                    of the record of the same key
//	                                    (state.ResultStore); removed with it
//
// Version 2 added completed_by_channel, completed_counts (the uint64) and
// completed_channels, for the shares of completedshare.go; version 3 the
// groups, per connector_id; version 4 completed_results. migrate fills
// them from the records of the version before (the group of none: a file
// does not know its channels' connector_ids; no record has a result).
var (
	bucketMeta           = []byte("meta")
	bucketPending        = []byte("pending")
	bucketPendingIDs     = []byte("pending_ids")
	bucketPendingCount   = []byte("pending_count")
	bucketCompleted      = []byte("completed")
	bucketCompletedOrder = []byte("completed_order")
	// Layout 2 (completedshare.go).
	bucketCompletedByChannel = []byte("completed_by_channel")
	bucketCompletedChannels  = []byte("completed_counts")
	// Layout 3.
	bucketCompletedGroups = []byte("completed_groups")
	// Layout 4.
	bucketCompletedResults = []byte("completed_results")

	keyLayoutVersion     = []byte("layout_version")
	keyCompletedCount    = []byte("completed_count")
	keyCompletedChannels = []byte("completed_channels")
	keyCompletedGroups   = []byte("completed_groups")
)

func allBuckets() [][]byte {
	return [][]byte{bucketMeta, bucketPending, bucketPendingIDs, bucketPendingCount, bucketCompleted, bucketCompletedOrder,
		bucketCompletedByChannel, bucketCompletedChannels, bucketCompletedGroups, bucketCompletedResults}
}

// initLayout creates the layout in an empty file, checks the version of an
// existing one and migrates an older one.
func initLayout(tx *bolt.Tx, path string) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		foreign := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			return fmt.Errorf("boltstore: %s is a bbolt database of something else (it has bucket %q)", path, name)
		})
		if foreign != nil {
			return foreign
		}
		for _, name := range allBuckets() {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta = tx.Bucket(bucketMeta)
		if err := meta.Put(keyCompletedCount, u64(0)); err != nil {
			return err
		}
		if err := meta.Put(keyCompletedChannels, u64(0)); err != nil {
			return err
		}
		if err := meta.Put(keyCompletedGroups, u64(0)); err != nil {
			return err
		}
		return meta.Put(keyLayoutVersion, u64(LayoutVersion))
	}
	raw := meta.Get(keyLayoutVersion)
	if len(raw) != 8 {
		return fmt.Errorf("boltstore: %s has no valid layout_version", path)
	}
	v := binary.BigEndian.Uint64(raw)
	switch {
	case v > LayoutVersion:
		return &openError{
			msg:  fmt.Sprintf("boltstore: database %s has layout version %d; this build reads up to %d (open it with a newer build)", path, v, LayoutVersion),
			kind: ErrLayoutVersion,
		}
	case v < LayoutVersion:
		for from := v; from < LayoutVersion; from++ {
			if err := migrate(tx, from); err != nil {
				return fmt.Errorf("boltstore: migrating %s from layout %d: %w", path, from, err)
			}
		}
		if err := meta.Put(keyLayoutVersion, u64(LayoutVersion)); err != nil {
			return err
		}
	}
	for _, name := range allBuckets() {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("boltstore: %s lacks bucket %q of layout %d", path, name, LayoutVersion)
		}
	}
	if len(meta.Get(keyCompletedCount)) != 8 || len(meta.Get(keyCompletedChannels)) != 8 || len(meta.Get(keyCompletedGroups)) != 8 {
		return fmt.Errorf("boltstore: %s has no valid completed_count, completed_channels or completed_groups", path)
	}
	return nil
}

// migrate rewrites a layout-from file into layout from+1.
func migrate(tx *bolt.Tx, from uint64) error {
	switch from {
	case 1:
		return migrateShares(tx)
	case 2:
		return migrateGroups(tx)
	case 3: // results: none kept before
		_, err := tx.CreateBucketIfNotExists(bucketCompletedResults)
		return err
	}
	return fmt.Errorf("no migration from layout %d", from)
}

// migrateShares (layout 1 → 2) indexes every completed record by channel
// and counts each channel's records.
func migrateShares(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketCompletedByChannel, bucketCompletedChannels} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	recs := tx.Bucket(bucketCompleted)
	if recs == nil {
		return fmt.Errorf("no bucket %q", bucketCompleted)
	}
	byChan, chans := tx.Bucket(bucketCompletedByChannel), tx.Bucket(bucketCompletedChannels)
	counts := map[string]uint64{}
	err := recs.ForEach(func(k, v []byte) error {
		if len(v) != completedValueLen {
			return nil
		}
		ch := channelOf(k)
		counts[string(ch)]++
		return byChan.Put(byChannelKey(ch, v[:16]), bytes.Clone(k[len(ch)+1:]))
	})
	if err != nil {
		return err
	}
	for ch, n := range counts {
		if err := chans.Put([]byte(ch), u64(n)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keyCompletedChannels, u64(uint64(len(counts))))
}

// migrateGroups (layout 2 → 3) puts every channel holding records in the
// group of none: its completed_counts value, a uint64, already says so.
func migrateGroups(tx *bolt.Tx) error {
	groups, err := tx.CreateBucketIfNotExists(bucketCompletedGroups)
	if err != nil {
		return err
	}
	chans := tx.Bucket(bucketCompletedChannels)
	if chans == nil {
		return fmt.Errorf("no bucket %q", bucketCompletedChannels)
	}
	var records, channels uint64
	err = chans.ForEach(func(_, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("a completed_counts value of %d bytes", len(v))
		}
		records += beUint64(v)
		channels++
		return nil
	})
	if err != nil {
		return err
	}
	var n uint64
	if channels > 0 {
		n = 1
		if err := groups.Put(groupKey(nil), append(u64(records), u64(channels)...)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keyCompletedGroups, u64(n))
}

// recordKey returns key(ch, id) after checking both IDs: non-empty, at most
// imv2.MaxIDBytes, and no 0x00 in the channel ID, which would make keys
// ambiguous.
func recordKey(channelID, messageID string) ([]byte, error) {
	if err := checkChannel(channelID); err != nil {
		return nil, err
	}
	if messageID == "" || len(messageID) > imv2.MaxIDBytes {
		return nil, imv2.Errorf(imv2.CodeInvalidPacket, "boltstore: message_id is %d bytes; want 1 to %d", len(messageID), imv2.MaxIDBytes)
	}
	k := make([]byte, 0, len(channelID)+1+len(messageID))
	k = append(k, channelID...)
	k = append(k, 0)
	return append(k, messageID...), nil
}

func checkChannel(channelID string) error {
	if channelID == "" || len(channelID) > imv2.MaxIDBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "boltstore: channel ID is %d bytes; want 1 to %d", len(channelID), imv2.MaxIDBytes)
	}
	if strings.IndexByte(channelID, 0) >= 0 {
		return imv2.Errorf(imv2.CodeInvalidPacket, "boltstore: channel ID contains a 0x00 byte")
	}
	return nil
}

// channelPrefix is ch 0x00, the prefix of every key of the channel.
func channelPrefix(channelID string) []byte {
	return append([]byte(channelID), 0)
}

// keysWithPrefix returns copies of the keys and values of b that start
// with prefix. It collects before anyone deletes, since deleting under a
// bbolt cursor may skip the next key.
func keysWithPrefix(b *bolt.Bucket, prefix []byte) (keys, values [][]byte) {
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		keys = append(keys, bytes.Clone(k))
		values = append(values, bytes.Clone(v))
	}
	return keys, values
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// getU64 reads a counter; a missing key is 0.
func getU64(b *bolt.Bucket, key []byte) uint64 {
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
