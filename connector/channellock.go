package connector

import (
	"hash/maphash"
	"sync"
)

// channelLockStripes is how many mutexes channelLocks has: enough that
// two busy channels seldom share one, and a fixed size however many
// channels there are.
const channelLockStripes = 64

// channelLocks serialises the kit's changes to one channel's binding
// (Bind, Unbind, Expire, Revoke, UpdateBinding, a drop). It is striped:
// channel IDs hash onto a fixed array of mutexes, so it never grows and
// never needs sweeping; two channels on one stripe merely wait for each
// other. It orders changes within this process only; replicas sharing a
// store rely on the store's own transactions.
type channelLocks struct {
	seed    maphash.Seed
	stripes [channelLockStripes]sync.Mutex
}

func newChannelLocks() *channelLocks { return &channelLocks{seed: maphash.MakeSeed()} }

// lock locks the stripe of channelID and returns its unlock.
func (l *channelLocks) lock(channelID string) (unlock func()) {
	m := &l.stripes[maphash.String(l.seed, channelID)%channelLockStripes]
	m.Lock()
	return m.Unlock
}
