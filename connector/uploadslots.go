package connector

import "sync"

// uploadSlotFloor is the upload bodies each peer may always have read at
// once, whatever other peers hold (for up to uploadPeers peers at once):
// its floor of upload slots.
const uploadSlotFloor = 1

// uploadSlots counts the upload bodies read at once, per peer (a
// connector_id, or a channel of none known: the peers of quota), as the
// byte room is shared: each peer holding uploads has a floor of
// uploadSlotFloor slots, for up to uploadPeers peers, and what peers
// read beyond their floors takes at most pool (MaxConcurrentUploads)
// shared slots. So one connector_id's slow uploads can hold its floor and
// the pool, and another's upload still gets a slot of its own (issue 37).
// At most uploadPeers·uploadSlotFloor + pool bodies are read at once (72
// with the defaults), and the map holds no more peers than that.
type uploadSlots struct {
	pool   int
	mu     sync.Mutex
	floors int // floor slots taken, of uploadPeers·uploadSlotFloor
	pooled int // pool slots taken
	peers  map[string]*slotUse
}

// slotUse is what one peer holds: slots of its floor, then of the pool.
type slotUse struct{ floor, pooled int }

func newUploadSlots(pool int) *uploadSlots {
	return &uploadSlots{pool: pool, peers: map[string]*slotUse{}}
}

// take gives peer one slot, from its floor while it has one left and the
// floors are not all taken, else from the pool, and reports false when
// neither has one. A true take is matched by one release.
func (s *uploadSlots) take(peer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.peers[peer]
	if u == nil {
		u = &slotUse{}
	}
	switch {
	case u.floor < uploadSlotFloor && s.floors < uploadPeers*uploadSlotFloor:
		u.floor++
		s.floors++
	case s.pooled < s.pool:
		u.pooled++
		s.pooled++
	default:
		return false
	}
	s.peers[peer] = u
	return true
}

// release gives back one of peer's slots: a pool slot first, so the floor
// stays with a peer still reading.
func (s *uploadSlots) release(peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.peers[peer]
	if u == nil {
		return
	}
	if u.pooled > 0 {
		u.pooled--
		s.pooled--
	} else if u.floor > 0 {
		u.floor--
		s.floors--
	}
	if u.floor == 0 && u.pooled == 0 {
		delete(s.peers, peer)
	}
}
