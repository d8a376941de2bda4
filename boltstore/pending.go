package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/pendingcodec"
)

// Add implements imv2.PendingStore: the entry is on disk, fsynced, before
// Add returns, so a crash right after the first send still resends after
// restart (S1). A full channel fails with code pending_full and nothing is
// dropped; a message_id already pending with other content fails with code
// message_id_conflict and with the same content changes nothing.
func (s *Store) Add(ctx context.Context, e imv2.PendingEntry) error {
	idKey, err := recordKey(e.ChannelID, e.Message.MessageID)
	if err != nil {
		return err
	}
	fp := imv2.FingerprintOf(&e.Message)
	value := pendingcodec.Append(nil, &e)
	return s.update(ctx, func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketPendingIDs)
		if old := ids.Get(idKey); old != nil {
			if len(old) != 8+len(fp) || !bytes.Equal(old[8:], fp[:]) && !sameStored(tx, e.ChannelID, old[:8], fp) {
				return imv2.Errorf(imv2.CodeMessageIDConflict, "message_id %q is pending with other content (M2)", e.Message.MessageID)
			}
			return errNoChange
		}
		counts := tx.Bucket(bucketPendingCount)
		ch := []byte(e.ChannelID)
		n := getU64(counts, ch)
		if n >= s.pendingCap {
			return imv2.Errorf(imv2.CodePendingFull, "channel %q has %d pending messages, the cap", e.ChannelID, n)
		}
		pending := tx.Bucket(bucketPending)
		seq, err := pending.NextSequence()
		if err != nil {
			return err
		}
		seqKey := binary.BigEndian.AppendUint64(channelPrefix(e.ChannelID), seq)
		if err := pending.Put(seqKey, value); err != nil {
			return err
		}
		if err := ids.Put(idKey, append(u64(seq), fp[:]...)); err != nil {
			return err
		}
		return counts.Put(ch, u64(n+1))
	})
}

// Remove implements imv2.PendingStore. Removing a message that is not
// pending is no error.
func (s *Store) Remove(ctx context.Context, channelID, messageID string) error {
	idKey, err := recordKey(channelID, messageID)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketPendingIDs)
		v := ids.Get(idKey)
		if len(v) < 8 {
			return errNoChange
		}
		seqKey := append(channelPrefix(channelID), v[:8]...)
		if err := tx.Bucket(bucketPending).Delete(seqKey); err != nil {
			return err
		}
		if err := ids.Delete(idKey); err != nil {
			return err
		}
		return addPendingCount(tx, channelID, -1)
	})
}

// List implements imv2.PendingStore: the channel's entries in Add order.
func (s *Store) List(ctx context.Context, channelID string) ([]imv2.PendingEntry, error) {
	if err := checkChannel(channelID); err != nil {
		return nil, err
	}
	var out []imv2.PendingEntry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		prefix := channelPrefix(channelID)
		c := tx.Bucket(bucketPending).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			e, err := pendingcodec.Decode(channelID, v)
			if err != nil {
				return fmt.Errorf("boltstore: %w", err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DropPending forgets every pending entry of a permanently deleted channel
// (S7) without reporting them as failed. The channel's completed records
// are DropChannel's business (S9).
func (s *Store) DropPending(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		prefix := channelPrefix(channelID)
		for _, b := range [][]byte{bucketPending, bucketPendingIDs} {
			bucket := tx.Bucket(b)
			keys, _ := keysWithPrefix(bucket, prefix)
			for _, k := range keys {
				if err := bucket.Delete(k); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketPendingCount).Delete([]byte(channelID))
	})
}

// addPendingCount moves a channel's counter by delta, deleting it at zero
// so the counter bucket holds only channels with entries.
func addPendingCount(tx *bolt.Tx, channelID string, delta int64) error {
	counts := tx.Bucket(bucketPendingCount)
	ch := []byte(channelID)
	n := int64(getU64(counts, ch)) + delta
	if n <= 0 {
		return counts.Delete(ch)
	}
	return counts.Put(ch, u64(uint64(n)))
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// sameStored reports whether the pending entry of channelID stored under
// sequence seq has the content fingerprint fp by the current encoding: the
// ID record may hold an earlier encoding's (one that also hashed
// download_url and expires_at), and a message added again with the same
// content is no conflict (S6).
func sameStored(tx *bolt.Tx, channelID string, seq []byte, fp imv2.Fingerprint) bool {
	v := tx.Bucket(bucketPending).Get(append(channelPrefix(channelID), seq...))
	if v == nil {
		return false
	}
	e, err := pendingcodec.Decode(channelID, v)
	return err == nil && imv2.FingerprintOf(&e.Message) == fp
}
