package imv2

import "time"

// Shares of a full memoryCompletedStore. The store is shared by every
// channel of a process, so when it is full a record must go for a new
// one; taking simply the oldest would let one peer's flood of finals push
// out another channel's records while that channel's sender may still
// resend them, and the resend would then be shown again. So each channel
// holding records is guaranteed a share of the capacity (capacity over
// the channels holding records), and a record younger than the resend
// horizon whose channel is within its share is protected: room is made
// from, in order, the oldest record if it is not protected, the oldest
// record of the recording channel itself if it is at or over its share
// (a flood evicts its own records), or the oldest record of the channel
// holding the most, if that is over its share. When none of these
// exists, a Claim is refused channel_busy (retryable, the sender tries
// later) rather than evict a protected record.

// resendHorizon is how long after its recording a record may still
// answer a resend: a sender keeps a message pending that long at most
// (the default PendingTTL), and its resends stop with it.
const resendHorizon = defaultPendingTTL

// share is the records each channel holding some is guaranteed, counting
// channel when it holds none yet; 0 when there are more channels than
// capacity, and then no record is protected (the store cannot keep one
// for each).
func (s *memoryCompletedStore) share(channel string) int {
	n := len(s.lru.chans)
	if _, ok := s.lru.chans[channel]; !ok {
		n++
	}
	return s.capacity / n
}

// protected reports whether the record at may still answer a resend of
// a channel within its share, so another channel's record must not push
// it out.
func (s *memoryCompletedStore) protected(at int32, now time.Time, share int) bool {
	v := &s.lru.vals[at]
	recorded := s.lru.record(v).expires.Add(-s.ttl)
	return share > 0 && now.Sub(recorded) < min(s.ttl, resendHorizon) && int(s.lru.counts[v.slot]) <= share
}

// makeRoom removes one record for a new record of channel, by the order
// above, and reports false when every candidate is protected (nothing is
// removed then).
func (s *memoryCompletedStore) makeRoom(now time.Time, channel string) bool {
	f := s.lru
	oldest := f.oldest()
	if oldest < 0 {
		return true
	}
	share := s.share(channel)
	if !s.protected(oldest, now, share) {
		f.RemoveOldest()
		return true
	}
	if slot, ok := f.chans[channel]; ok && int(f.counts[slot]) >= share {
		f.removeAt(f.tails[slot])
		return true
	}
	if h := f.hogOver(share); h >= 0 {
		f.removeAt(f.tails[h])
		return true
	}
	return false
}

// removeAt removes the record at, out of order.
func (f *recordFIFO) removeAt(at int32) {
	f.drop(f.position(at), at, nil)
	f.stale++
}

// hogOver returns the slot of a channel holding more than share records,
// the one with the most as far as known, else -1. hog is kept on each
// Add; when it is no longer over share, the slots over it are collected
// in one pass (overs) and taken one by one, so a full store of channels
// at their share pays that pass once per channel, not per record.
func (f *recordFIFO) hogOver(share int) int32 {
	if f.hog >= 0 && int(f.counts[f.hog]) > share {
		return f.hog
	}
	for n := len(f.overs); n > 0; n = len(f.overs) {
		if h := f.overs[n-1]; int(f.counts[h]) > share { // a freed slot counts 0
			return h
		}
		f.overs = f.overs[:n-1]
	}
	for _, slot := range f.chans {
		if int(f.counts[slot]) > share {
			f.overs = append(f.overs, slot)
		}
	}
	if n := len(f.overs); n > 0 {
		return f.overs[n-1]
	}
	return -1
}
