package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/connid"
	"github.com/xagentkit/imv2/state"
)

const (
	// completedValueLen is t ‖ seq ‖ fingerprint.
	completedValueLen = 8 + 8 + len(imv2.Fingerprint{})
	// inlineSweep bounds the expired records one Record removes, so a
	// Record after a long idle time stays quick; Sweep removes the rest.
	inlineSweep = 16
	// defaultSweepBatch bounds the records one Sweep transaction removes,
	// so a large sweep does not hold the writer lock for long.
	defaultSweepBatch = 1000
	// orderFillPercent is how full a split leaves a page of the
	// append-only order index (bbolt's default is 0.5).
	orderFillPercent = 0.95
)

// Lookup implements imv2.CompletedStore. A record is visible while it is
// younger than CompletedTTL, swept or not.
func (s *Store) Lookup(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, bool, error) {
	key, err := recordKey(channelID, messageID)
	if err != nil {
		return imv2.Fingerprint{}, false, err
	}
	var fp imv2.Fingerprint
	var found bool
	err = s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCompleted).Get(key)
		if len(v) != completedValueLen {
			return nil
		}
		if beUint64(v[:8]) <= s.expiredCutoff() {
			return nil
		}
		copy(fp[:], v[16:])
		found = true
		return nil
	})
	if err != nil {
		return imv2.Fingerprint{}, false, err
	}
	return fp, found, nil
}

// Record implements imv2.CompletedStore. The record is committed with
// fsync before Record returns, so the accepted ack that follows it survives
// a crash (S8). Recording a message again replaces its fingerprint and
// restarts its TTL. When CompletedCap records are held one goes by the
// shares of completedshare.go (the channel's group is the connector_id
// ctx carries, internal/connid); a few expired records go too.
func (s *Store) Record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint) error {
	return s.record(ctx, channelID, messageID, fp, nil)
}

// RecordResult implements state.ResultStore: Record, with result kept in
// completed_results under the record's key in the same transaction. It
// goes with its record (completedTx.remove), however the record goes.
func (s *Store) RecordResult(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, result []byte) error {
	if len(result) > state.MaxResultBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "result is %d bytes; at most %d are kept", len(result), state.MaxResultBytes)
	}
	if result == nil {
		result = []byte{} // bbolt keeps an empty value, not a nil one
	}
	return s.record(ctx, channelID, messageID, fp, result)
}

// LookupResult implements state.ResultStore.
func (s *Store) LookupResult(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, []byte, bool, error) {
	key, err := recordKey(channelID, messageID)
	if err != nil {
		return imv2.Fingerprint{}, nil, false, err
	}
	var fp imv2.Fingerprint
	var result []byte
	var found bool
	err = s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCompleted).Get(key)
		if len(v) != completedValueLen || beUint64(v[:8]) <= s.expiredCutoff() {
			return nil
		}
		copy(fp[:], v[16:])
		found = true
		if r := tx.Bucket(bucketCompletedResults).Get(key); r != nil {
			result = append([]byte{}, r...) // bbolt's memory is the transaction's
		}
		return nil
	})
	if err != nil {
		return imv2.Fingerprint{}, nil, false, err
	}
	return fp, result, found, nil
}

// record is Record, keeping result with the record unless it is nil.
func (s *Store) record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, result []byte) error {
	key, err := recordKey(channelID, messageID)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		now := s.clock.Now()
		group := connid.ConnectorID(ctx)
		c := openCompleted(tx)
		if err := c.join([]byte(channelID), group); err != nil {
			return err
		}
		if old := c.recs.Get(key); old != nil {
			if err := c.remove(key, old); err != nil {
				return err
			}
		}

		cutoff := timeKey(now.Add(-s.ttl))
		cur := c.order.Cursor()
		for removed := 0; removed < inlineSweep; removed++ {
			k, v := cur.First()
			if k == nil || len(k) == 16 && beUint64(k[:8]) > cutoff {
				break
			}
			if err := c.removeOrdered(k, v); err != nil {
				return err
			}
		}
		for c.count >= s.completedCap {
			if ok, err := c.makeRoom([]byte(channelID), group, s.completedCap, s.protectedSince(now)); !ok || err != nil {
				if err != nil {
					return err
				}
				c.count = 0 // nothing left to remove: the counter was off
			}
		}

		seq, err := c.order.NextSequence()
		if err != nil {
			return err
		}
		orderKey := binary.BigEndian.AppendUint64(u64(timeKey(now)), seq)
		value := make([]byte, 0, completedValueLen)
		value = append(append(value, orderKey...), fp[:]...)
		if err := c.put(key, value, group); err != nil {
			return err
		}
		if result != nil {
			if err := c.results.Put(key, result); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketClaims).Delete(key); err != nil { // completes a claim (claim.go)
			return err
		}
		if err := tx.Bucket(bucketUnposted).Delete(key); err != nil {
			return err
		}
		return c.flush()
	})
}

// DropChannel implements imv2.CompletedStore: it forgets every completed
// record of a permanently deleted channel (S7). Pending entries stay (S9);
// DropPending removes those.
func (s *Store) DropChannel(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		hadClaims, err := dropClaims(tx, channelID)
		if err != nil {
			return err
		}
		c := openCompleted(tx)
		keys, values := keysWithPrefix(c.recs, channelPrefix(channelID))
		if len(keys) == 0 {
			if hadClaims {
				return nil
			}
			return errNoChange
		}
		for i, k := range keys {
			if err := c.remove(k, values[i]); err != nil {
				return err
			}
		}
		return c.flush()
	})
}

// Handover implements imv2.CompletedStore: the newest live records of
// channel from, at most imv2.MaxHandoverRecords, are copied to channel to
// in one transaction, with their age, so a handover never extends a
// record's life, and so are from's claims (claim.go). A record to already
// holds with the same time and content is left alone, so a repeated
// handover changes nothing. Copies count against CompletedCap like any
// record; when full, records go by the shares of completedshare.go.
func (s *Store) Handover(ctx context.Context, from, to string) error {
	if err := checkChannel(from); err != nil {
		return err
	}
	if err := checkChannel(to); err != nil {
		return err
	}
	if from == to {
		return nil
	}
	prefix := channelPrefix(from)
	return s.update(ctx, func(tx *bolt.Tx) error {
		claimed, err := handoverClaims(tx, from, to, s.expiredCutoff())
		if err != nil {
			return err
		}
		c := openCompleted(tx)
		// The copies join to's group if it holds records, else the
		// caller's connector_id, else from's group.
		group := connid.ConnectorID(ctx)
		if _, g := c.channelCount([]byte(from)); group == "" && g != nil {
			group = string(g[1:])
		}
		if err := c.join([]byte(to), group); err != nil {
			return err
		}
		keys, values := keysWithPrefix(c.recs, prefix)
		cutoff := s.expiredCutoff()
		type record struct{ id, value []byte }
		live := make([]record, 0, len(keys))
		for i, k := range keys {
			if v := values[i]; len(v) == completedValueLen && beUint64(v[:8]) > cutoff {
				live = append(live, record{k[len(prefix):], v})
			}
		}
		// Oldest first by time ‖ seq, the order index's order.
		slices.SortFunc(live, func(a, b record) int { return bytes.Compare(a.value[:16], b.value[:16]) })
		if len(live) > imv2.MaxHandoverRecords {
			live = live[len(live)-imv2.MaxHandoverRecords:]
		}
		copied := 0
		for _, r := range live {
			v := r.value
			key, err := recordKey(to, string(r.id))
			if err != nil {
				return err
			}
			if old := c.recs.Get(key); old != nil {
				if len(old) == completedValueLen && bytes.Equal(old[:8], v[:8]) && bytes.Equal(old[16:], v[16:]) {
					continue // a repeated handover: already there
				}
				if err := c.remove(key, old); err != nil {
					return err
				}
			}
			seq, err := c.order.NextSequence()
			if err != nil {
				return err
			}
			orderKey := binary.BigEndian.AppendUint64(bytes.Clone(v[:8]), seq) // the original time: same age
			if err := c.put(key, append(orderKey, v[16:]...), group); err != nil {
				return err
			}
			if res := c.results.Get(append(bytes.Clone(prefix), r.id...)); res != nil {
				if err := c.results.Put(key, bytes.Clone(res)); err != nil {
					return err
				}
			}
			copied++
		}
		if copied == 0 {
			if claimed {
				return nil
			}
			return errNoChange
		}
		for c.count > s.completedCap {
			if ok, err := c.makeRoom([]byte(to), group, s.completedCap, s.protectedSince(s.clock.Now())); !ok || err != nil {
				if err != nil {
					return err
				}
				c.count = 0 // nothing left to remove: the counter was off
			}
		}
		return c.flush()
	})
}

// Sweep removes every completed record older than CompletedTTL and returns
// how many it removed. It works in transactions of up to 1000 records and
// stops early, with ctx's error, when ctx is done. Pending entries are
// never swept: their expiry is the Channel's, which reports it (S1).
// Claims whose lease ended CompletedTTL ago go too, uncounted (claim.go).
func (s *Store) Sweep(ctx context.Context) (int, error) {
	if _, err := s.sweepClaims(ctx); err != nil {
		return 0, err
	}
	total := 0
	for {
		n := 0
		err := s.update(ctx, func(tx *bolt.Tx) error {
			n = 0 // a group that fails runs fn again
			cutoff := s.expiredCutoff()
			c := openCompleted(tx)
			cur := c.order.Cursor()
			for k, v := cur.First(); k != nil && n < s.sweepBatch; k, v = cur.First() {
				if len(k) == 16 && beUint64(k[:8]) > cutoff {
					break
				}
				if err := c.removeOrdered(k, v); err != nil {
					return err
				}
				n++
			}
			if n == 0 {
				return errNoChange
			}
			return c.flush()
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < s.sweepBatch {
			return total, nil
		}
	}
}

// expiredCutoff is the timeKey at or below which a record has expired.
func (s *Store) expiredCutoff() uint64 {
	return timeKey(s.clock.Now().Add(-s.ttl))
}

// timeKey maps t to a uint64 whose big-endian bytes sort like the times:
// Unix nanoseconds with the sign bit flipped. Clock times lie well inside
// UnixNano's range (years 1678 to 2262).
func timeKey(t time.Time) uint64 {
	return uint64(t.UnixNano()) ^ (1 << 63)
}
