package imv2

import (
	"context"
	"strings"
	"time"

	"github.com/xagentkit/imv2/internal/connid"
)

// Shares of a full memoryCompletedStore. The store is shared by every
// channel of a process, so when it is full a record must go for a new
// one; taking simply the oldest would let one peer's flood of finals push
// out another channel's records while that channel's sender may still
// resend them, and the resend would then be shown again. So each group of
// channels holding records (a connector_id, Options.ConnectorID; channels
// of none form one group) is guaranteed a share of the capacity (capacity
// over the groups holding records), and each of its channels holding
// records a share of that (the group's share over its channels): a peer
// opening many channels dilutes its own channels' shares, not another
// connector_id's. A record younger than the resend horizon whose channel
// is within its share is protected: room is made from, in order, the
// oldest record if it is not protected, the oldest record of the
// recording channel itself if it is at or over its share (a flood evicts
// its own records), or the oldest record of a channel over its share.
// When none of these exists, a Claim is refused channel_busy (retryable,
// the sender tries later) rather than evict a protected record.

// resendHorizon is how long after its recording a record may still answer
// a resend: a sender keeps a message pending that long at most (the
// default PendingTTL), and its resends stop with it.
const resendHorizon = defaultPendingTTL

// shares are the shares of a full store as a new record of one channel
// sees them: that channel and its group count as holding records.
type shares struct {
	f        *recordFIFO
	capacity int
	groups   int   // groups holding records, the recording one counted
	group    int32 // the recording channel's group slot; -1: it holds none
	fresh    bool  // the recording channel holds no record yet
}

// shares returns the shares for a new record of channel, which joins
// group if it holds no record yet.
func (s *memoryCompletedStore) shares(channel, group string) shares {
	f := s.lru
	sh := shares{f: f, capacity: s.capacity, groups: f.ngroups, group: -1}
	if slot, ok := f.chans[channel]; ok {
		sh.group = f.groups[slot]
	} else {
		sh.fresh = true
		if g, ok := f.groupIDs[group]; ok && f.gchans[g] > 0 {
			sh.group = g
		}
	}
	if sh.group < 0 {
		sh.groups++
	}
	return sh
}

// of returns the share of the channel at slot, which holds records; 0
// when there are more channels than capacity, and then no record of it
// is protected.
func (sh shares) of(slot int32) int {
	g := sh.f.groups[slot]
	n := int(sh.f.gchans[g])
	if sh.fresh && g == sh.group {
		n++
	}
	return sh.capacity / sh.groups / n
}

// own returns the share of the recording channel.
func (sh shares) own() int {
	n := 1
	if sh.group >= 0 {
		n = int(sh.f.gchans[sh.group])
		if sh.fresh {
			n++
		}
	}
	return sh.capacity / sh.groups / n
}

// protected reports whether the record at may still answer a resend of
// a channel within its share, so another channel's record must not push
// it out.
func (s *memoryCompletedStore) protected(at int32, now time.Time, sh shares) bool {
	v := &s.lru.vals[at]
	recorded := s.lru.record(v).expires.Add(-s.ttl)
	share := sh.of(v.slot)
	return share > 0 && now.Sub(recorded) < min(s.ttl, resendHorizon) && int(s.lru.counts[v.slot]) <= share
}

// makeRoom removes one record for a new record of channel (of group, if
// new), by the order above, and reports false when every candidate is
// protected (nothing is removed then).
func (s *memoryCompletedStore) makeRoom(now time.Time, channel, group string) bool {
	f := s.lru
	oldest := f.oldest()
	if oldest < 0 {
		return true
	}
	sh := s.shares(channel, group)
	if !s.protected(oldest, now, sh) {
		f.RemoveOldest()
		return true
	}
	if slot, ok := f.chans[channel]; ok && int(f.counts[slot]) >= sh.own() {
		f.removeAt(f.tails[slot])
		return true
	}
	if h := f.hogOver(sh.of); h >= 0 {
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

// hogOver returns the slot of a channel holding more than its share,
// the one with the most records if it is, else -1. hog is kept on each
// Add; when it is not over its share, the slots over theirs are collected
// in one pass (overs) and taken one by one, each checked again when
// taken, so a full store of channels at their share pays that pass once
// per channel, not per record.
func (f *recordFIFO) hogOver(share func(slot int32) int) int32 {
	over := func(slot int32) bool { return f.counts[slot] > 0 && int(f.counts[slot]) > share(slot) } // a freed slot counts 0
	if f.hog >= 0 && over(f.hog) {
		return f.hog
	}
	for n := len(f.overs); n > 0; n = len(f.overs) {
		if h := f.overs[n-1]; over(h) {
			return h
		}
		f.overs = f.overs[:n-1]
	}
	for _, slot := range f.chans {
		if over(slot) {
			f.overs = append(f.overs, slot)
		}
	}
	if n := len(f.overs); n > 0 {
		return f.overs[n-1]
	}
	return -1
}

// joinGroup counts a channel into group, and returns the group's slot.
func (f *recordFIFO) joinGroup(group string) int32 {
	g, ok := f.groupIDs[group]
	if !ok {
		if n := len(f.freeGroups); n > 0 {
			g, f.freeGroups = f.freeGroups[n-1], f.freeGroups[:n-1]
		} else {
			g = int32(len(f.gnames))
			f.gnames = append(f.gnames, "")
			f.gchans = append(f.gchans, 0)
		}
		name := strings.Clone(group) // not the caller's string
		f.gnames[g] = name
		f.groupIDs[name] = g
	}
	f.gchans[g]++
	if f.gchans[g] == 1 {
		f.ngroups++
	}
	return g
}

// leaveGroup counts a channel out of group slot g, which goes when it has
// no channel left.
func (f *recordFIFO) leaveGroup(g int32) {
	f.gchans[g]--
	if f.gchans[g] > 0 {
		return
	}
	f.ngroups--
	delete(f.groupIDs, f.gnames[g])
	f.groupDel++
	f.gnames[g] = ""
	f.freeGroups = append(f.freeGroups, g)
}

// groupName returns the group of a channel holding records, and whether
// it holds any.
func (f *recordFIFO) groupName(channel string) (string, bool) {
	slot, ok := f.chans[channel]
	if !ok {
		return "", false
	}
	return f.gnames[f.groups[slot]], true
}

// groupOf returns the group a new record of channel joins: the
// connector_id its call's context carries (a Channel puts its own on every
// store call, internal/connid), else none ("").
func (s *memoryCompletedStore) groupOf(ctx context.Context, _ string) string {
	return connid.ConnectorID(ctx)
}
