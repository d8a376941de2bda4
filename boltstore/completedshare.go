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
// resend it (shown again). Each group of channels holding records (a
// connector_id, read from the Record's context: the Channel puts its
// Options.ConnectorID there; channels of none form one group) is
// guaranteed a share of CompletedCap (CompletedCap over the groups
// holding records), and each of its channels holding records a share of
// that (the group's share over its channels): a peer opening many
// channels dilutes its own channels' shares, not another connector_id's.
// A channel keeps its group while it holds records, so a Record whose
// context carries none (the kit's) joins the channel's records' group;
// one that carries a connector_id moves a channel of none to it. A
// record younger than resendHorizon whose channel is within its share is
// protected. Room is made from, in order: the oldest record if it is not
// protected; the recording channel's own oldest if it is at or over its
// share (a flood evicts its own records); the oldest record of the
// channel most over its share. Claims do not count against CompletedCap
// here, so when the store is full the records of its channels add up to
// CompletedCap and one of these always exists (the shares add up to at
// most CompletedCap): no Claim has to be refused (imv2's memory store
// refuses one channel_busy only because its claims share the cap).

// resendHorizon is how long after its recording a record may still answer
// a resend: a sender keeps a message pending that long at most (imv2's
// default PendingTTL), and its resends stop with it.
const resendHorizon = time.Hour

// completedTx is the completed records' buckets and counters within one
// write transaction; flush writes the counters back.
type completedTx struct {
	meta, recs, order, byChan, chans, groups, results *bolt.Bucket
	count, channels, ngroups                          uint64
}

func openCompleted(tx *bolt.Tx) *completedTx {
	meta := tx.Bucket(bucketMeta)
	c := &completedTx{
		meta:     meta,
		recs:     tx.Bucket(bucketCompleted),
		order:    tx.Bucket(bucketCompletedOrder),
		byChan:   tx.Bucket(bucketCompletedByChannel),
		chans:    tx.Bucket(bucketCompletedChannels),
		groups:   tx.Bucket(bucketCompletedGroups),
		results:  tx.Bucket(bucketCompletedResults),
		count:    getU64(meta, keyCompletedCount),
		channels: getU64(meta, keyCompletedChannels),
		ngroups:  getU64(meta, keyCompletedGroups),
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
	if err := c.meta.Put(keyCompletedGroups, u64(c.ngroups)); err != nil {
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

// channelCount returns the records channel ch holds and its group (a
// key of completed_groups); 0 and nil when it holds none.
func (c *completedTx) channelCount(ch []byte) (uint64, []byte) {
	v := c.chans.Get(ch)
	if len(v) < 8 {
		return 0, nil
	}
	return beUint64(v[:8]), groupKey(v[8:])
}

// groupKey is the key of group connectorID in completed_groups: one
// byte before it, as bbolt keys may not be empty (the group of none).
func groupKey(connectorID []byte) []byte {
	return append([]byte{'g'}, connectorID...)
}

// groupCounts returns the records and the channels holding records of
// group g.
func (c *completedTx) groupCounts(g []byte) (records, channels uint64) {
	v := c.groups.Get(g)
	if len(v) != 16 {
		return 0, 0
	}
	return beUint64(v[:8]), beUint64(v[8:])
}

// addToGroup adds records and channels (±1 or 0) to group g's counts,
// and forgets a group left holding no channel.
func (c *completedTx) addToGroup(g []byte, records, channels int) error {
	r, n := c.groupCounts(g)
	r, n = uint64(max(int64(r)+int64(records), 0)), uint64(max(int64(n)+int64(channels), 0))
	if n == 0 {
		if c.groups.Get(g) != nil {
			c.ngroups -= min(c.ngroups, 1)
		}
		return c.groups.Delete(g)
	}
	if c.groups.Get(g) == nil {
		c.ngroups++
	}
	return c.groups.Put(g, append(u64(r), u64(n)...))
}

// join moves channel ch, if it holds records in the group of none (put
// there by a Record whose context carried no connector_id, the kit's),
// with them to group connectorID: the channel's own Channel says whose
// it is.
func (c *completedTx) join(ch []byte, connectorID string) error {
	n, g := c.channelCount(ch)
	if n == 0 || connectorID == "" || len(g) != 1 {
		return nil
	}
	if err := c.addToGroup(g, -int(n), -1); err != nil {
		return err
	}
	if err := c.addToGroup(groupKey([]byte(connectorID)), int(n), 1); err != nil {
		return err
	}
	return c.chans.Put(ch, append(u64(n), connectorID...))
}

// put adds the record key → value (orderKey ‖ fingerprint), which the
// store does not hold; a channel holding none yet joins group
// connectorID.
func (c *completedTx) put(key, value []byte, connectorID string) error {
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
	n, g := c.channelCount(ch)
	joined := 0
	if n == 0 {
		g = groupKey([]byte(connectorID))
		c.channels++
		joined = 1
	}
	c.count++
	if err := c.addToGroup(g, 1, joined); err != nil {
		return err
	}
	return c.chans.Put(ch, append(u64(n+1), g[1:]...))
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
	if err := c.results.Delete(key); err != nil { // a result goes with its record
		return err
	}
	c.count -= min(c.count, 1)
	switch n, g := c.channelCount(ch); {
	case n > 1:
		if err := c.addToGroup(g, -1, 0); err != nil {
			return err
		}
		return c.chans.Put(ch, append(u64(n-1), g[1:]...))
	case n == 1:
		c.channels -= min(c.channels, 1)
		if err := c.addToGroup(g, -1, -1); err != nil {
			return err
		}
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

// shares are the shares of a full store as a new record of one channel
// sees them: that channel and its group count as holding records.
type shares struct {
	c      *completedTx
	cap    uint64
	groups uint64 // groups holding records, the recording one counted
	group  []byte // the recording channel's group
	fresh  bool   // the recording channel holds no record yet
}

// sharesFor returns the shares for a new record of channel ch, which
// joins group connectorID if it holds no record yet.
func (c *completedTx) sharesFor(ch []byte, connectorID string, cap uint64) shares {
	sh := shares{c: c, cap: cap, groups: c.ngroups}
	n, g := c.channelCount(ch)
	if n == 0 {
		sh.fresh, g = true, groupKey([]byte(connectorID))
	}
	sh.group = g
	if _, chans := c.groupCounts(g); chans == 0 {
		sh.groups++
	}
	return sh
}

// of returns the share of a channel of group g; 0 when there are more
// groups or channels than the cap, and then no record of it is protected.
func (sh shares) of(g []byte) uint64 {
	_, n := sh.c.groupCounts(g)
	if sh.fresh && bytes.Equal(g, sh.group) {
		n++
	}
	return sh.cap / max(sh.groups, 1) / max(n, 1)
}

// makeRoom removes one record for a new record of channel ch (joining
// group connectorID if it holds none), by the order above; horizon is the
// timeKey at or below which a record is no longer protected. It reports
// false when the store holds no record to remove (its counter is off).
func (c *completedTx) makeRoom(ch []byte, connectorID string, cap, horizon uint64) (bool, error) {
	k, v := c.order.Cursor().First()
	if k == nil {
		return false, nil
	}
	sh := c.sharesFor(ch, connectorID, cap)
	n, g := c.channelCount(channelOf(v))
	if share := sh.of(g); share == 0 || len(k) != 16 || beUint64(k[:8]) <= horizon || n > share {
		return true, c.removeOrdered(k, v)
	}
	if own, _ := c.channelCount(ch); own > 0 && own >= sh.of(sh.group) {
		if ok, err := c.removeOldestOf(ch); ok || err != nil {
			return true, err
		}
	}
	if hog := c.hogOver(sh); hog != nil {
		if ok, err := c.removeOldestOf(hog); ok || err != nil {
			return true, err
		}
	}
	return true, c.removeOrdered(k, v) // not reached while the counts add up to cap
}

// hogOver returns the channel most over its share, or nil. It reads one
// counter per channel (and one per group): it runs only when a channel
// below its share records into a full store whose oldest record is
// protected, and that channel's share is then filled from the hog's.
func (c *completedTx) hogOver(sh shares) []byte {
	var hog []byte
	var most uint64
	shareOf := map[string]uint64{}
	cur := c.chans.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(v) < 8 {
			continue
		}
		share, ok := shareOf[string(v[8:])]
		if !ok {
			share = sh.of(groupKey(v[8:]))
			shareOf[string(v[8:])] = share
		}
		if n := beUint64(v[:8]); n > share && n-share > most {
			hog, most = bytes.Clone(k), n-share
		}
	}
	return hog
}

// protectedSince is the timeKey above which a record is younger than the
// resend horizon (or the TTL, if shorter).
func (s *Store) protectedSince(now time.Time) uint64 {
	return timeKey(now.Add(-min(s.ttl, resendHorizon)))
}
