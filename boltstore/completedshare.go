package boltstore

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Shares of a full store, as imv2's memory store keeps them: the file is
// shared by every channel, so when it is full a record must go for a new
// one, and taking simply the oldest would let one peer's flood of finals
// push out another channel's record while that channel's sender may still
// resend it (shown again). Each channel holding records is guaranteed a
// share of CompletedCap (CompletedCap over the channels holding records),
// and a record younger than resendHorizon whose channel is within its
// share is protected. Room is made from, in order: the oldest record if it
// is not protected; the recording channel's own oldest if it is at or
// over its share (a flood evicts its own records); the oldest record of
// the channel holding the most, if that is over its share. Claims do not
// count against CompletedCap here, so when the store is full the records
// of its channels add up to CompletedCap and one of these always exists:
// no Claim has to be refused (imv2's memory store refuses one
// channel_busy only because its claims share the cap).

// The shares are per channel only: imv2's memory store shares per
// connector_id first (imv2.Options.ConnectorID), but a durable store is
// told a channel and a message ID, and its channel registry holds no
// connector_id. Per connector_id here would take the connector_id at
// Record (an exported way to read it from the store call's context, or a
// registry that maps channel to connector_id at Register) and a count
// per connector_id beside the count per channel.

// resendHorizon is how long after its recording a record may still answer
// a resend: a sender keeps a message pending that long at most (imv2's
// default PendingTTL), and its resends stop with it.
const resendHorizon = time.Hour

// completedTx is the completed records' buckets and counters within one
// write transaction; flush writes the counters back.
type completedTx struct {
	meta, recs, order, byChan, chans *bolt.Bucket
	count, channels                  uint64
}

func openCompleted(tx *bolt.Tx) *completedTx {
	meta := tx.Bucket(bucketMeta)
	c := &completedTx{
		meta:     meta,
		recs:     tx.Bucket(bucketCompleted),
		order:    tx.Bucket(bucketCompletedOrder),
		byChan:   tx.Bucket(bucketCompletedByChannel),
		chans:    tx.Bucket(bucketCompletedChannels),
		count:    getU64(meta, keyCompletedCount),
		channels: getU64(meta, keyCompletedChannels),
	}
	// Keys only ever go on the end of the order index, so a split may
	// leave the left page nearly full instead of half full.
	c.order.FillPercent = orderFillPercent
	return c
}

func (c *completedTx) flush() error {
	if err := c.meta.Put(keyCompletedCount, u64(c.count)); err != nil {
		return err
	}
	return c.meta.Put(keyCompletedChannels, u64(c.channels))
}

// channelOf returns the channel part of key(ch, id).
func channelOf(key []byte) []byte {
	if i := bytes.IndexByte(key, 0); i >= 0 {
		return key[:i]
	}
	return key
}

// byChannelKey is ch 0x00 t ‖ seq, a record's place in its channel's order.
func byChannelKey(ch, orderKey []byte) []byte {
	k := make([]byte, 0, len(ch)+1+len(orderKey))
	return append(append(append(k, ch...), 0), orderKey...)
}

// put adds the record key → value (orderKey ‖ fingerprint), which the
// store does not hold.
func (c *completedTx) put(key, value []byte) error {
	ch := channelOf(key)
	if err := c.order.Put(value[:16], key); err != nil {
		return err
	}
	if err := c.byChan.Put(byChannelKey(ch, value[:16]), key[len(ch)+1:]); err != nil {
		return err
	}
	if err := c.recs.Put(key, value); err != nil {
		return err
	}
	n := getU64(c.chans, ch)
	if n == 0 {
		c.channels++
	}
	c.count++
	return c.chans.Put(ch, u64(n+1))
}

// remove removes the record key, whose value is value, from every index.
func (c *completedTx) remove(key, value []byte) error {
	key, value = bytes.Clone(key), bytes.Clone(value) // bbolt's memory may move under a delete
	ch := channelOf(key)
	if len(value) == completedValueLen {
		if err := c.order.Delete(value[:16]); err != nil {
			return err
		}
		if err := c.byChan.Delete(byChannelKey(ch, value[:16])); err != nil {
			return err
		}
	}
	if err := c.recs.Delete(key); err != nil {
		return err
	}
	c.count -= min(c.count, 1)
	switch n := getU64(c.chans, ch); {
	case n > 1:
		return c.chans.Put(ch, u64(n-1))
	case n == 1:
		c.channels -= min(c.channels, 1)
		return c.chans.Delete(ch)
	}
	return nil
}

// removeOrdered removes the record at order key k, which names record key
// v; an order key whose record is gone or newer is dropped alone.
func (c *completedTx) removeOrdered(k, v []byte) error {
	if value := c.recs.Get(v); len(value) == completedValueLen && bytes.Equal(value[:16], k) {
		return c.remove(v, value)
	}
	return c.order.Delete(bytes.Clone(k))
}

// removeOldestOf removes the oldest record of channel ch, and reports
// whether it had one.
func (c *completedTx) removeOldestOf(ch []byte) (bool, error) {
	prefix := append(bytes.Clone(ch), 0)
	k, id := c.byChan.Cursor().Seek(prefix)
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return false, nil
	}
	key := append(prefix, id...)
	if value := c.recs.Get(key); len(value) == completedValueLen && bytes.Equal(byChannelKey(ch, value[:16]), k) {
		return true, c.remove(key, value)
	}
	return false, c.byChan.Delete(bytes.Clone(k)) // an index entry of no record
}

// makeRoom removes one record for a new record of channel ch, by the
// order above; horizon is the timeKey at or below which a record is no
// longer protected. It reports false when the store holds no record to
// remove (its counter is off).
func (c *completedTx) makeRoom(ch []byte, cap, horizon uint64) (bool, error) {
	k, v := c.order.Cursor().First()
	if k == nil {
		return false, nil
	}
	n := c.channels
	own := getU64(c.chans, ch)
	if own == 0 {
		n++
	}
	share := cap / n
	if share == 0 || len(k) != 16 || beUint64(k[:8]) <= horizon || getU64(c.chans, channelOf(v)) > share {
		return true, c.removeOrdered(k, v)
	}
	if own >= share {
		if ok, err := c.removeOldestOf(ch); ok || err != nil {
			return true, err
		}
	}
	if hog, most := c.hog(); most > share {
		if ok, err := c.removeOldestOf(hog); ok || err != nil {
			return true, err
		}
	}
	return true, c.removeOrdered(k, v) // not reached while the counts add up to cap
}

// hog returns the channel holding the most records and how many. It
// reads one counter per channel: it runs only when a channel below its
// share records into a full store whose oldest record is protected, and
// that channel's share is then filled from the hog's.
func (c *completedTx) hog() ([]byte, uint64) {
	var hog []byte
	var most uint64
	cur := c.chans.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(v) == 8 && beUint64(v) > most {
			hog, most = bytes.Clone(k), beUint64(v)
		}
	}
	return hog, most
}

// protectedSince is the timeKey above which a record is younger than the
// resend horizon (or the TTL, if shorter).
func (s *Store) protectedSince(now time.Time) uint64 {
	return timeKey(now.Add(-min(s.ttl, resendHorizon)))
}
