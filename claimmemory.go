package imv2

import (
	"context"
	"time"
)

// claimRecord is a claim held in a memoryCompletedStore.
type claimRecord struct {
	fp    Fingerprint
	owner string
	until time.Time
	begun bool // Begin ran: the post may have started
}

var _ ClaimStarter = (*memoryCompletedStore)(nil)

// Claim implements ClaimStore. In memory a claim cannot outlive its
// process, so an orphan is a claim whose lease ran out (its owner hangs or
// its Record failed) or one owner already holds. At most Cap claims are
// held; when full, claims whose lease ended more than TTL ago go first,
// and a Claim that still finds no room fails retryable (channel_busy).
func (s *memoryCompletedStore) Claim(ctx context.Context, channelID, messageID string, fp Fingerprint, owner string, lease time.Duration) (Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	k := completedKey{channelID, messageID}
	if s.lru != nil {
		if r, ok := s.lru.Peek(k); ok && now.Before(r.expires) {
			return Claim{State: ClaimCompleted, Fingerprint: r.fp}, nil
		}
	}
	mine := claimRecord{fp: fp, owner: owner, until: now.Add(lease)}
	if old, ok := s.claims[k]; ok {
		if old.owner != owner && now.Before(old.until) {
			return Claim{State: ClaimHeld, Owner: old.owner, Until: old.until}, nil
		}
		mine.fp, mine.begun = old.fp, old.begun // a takeover changes owner and lease only
		s.claims[k] = mine
		return Claim{State: ClaimOrphaned, Fingerprint: old.fp, Owner: old.owner, Unposted: !old.begun}, nil
	}
	if s.lru != nil && s.lru.Len()+len(s.claims) >= s.capacity && !s.makeRoom(now, channelID, s.groupOf(ctx, channelID)) {
		// Room would take a record another channel's sender may still
		// resend (completedshare.go): this flood waits instead.
		return Claim{}, &Error{Code: CodeChannelBusy, Message: "the completed store is full of records other channels may still need; try later", Retryable: true}
	}
	if !s.claimRoom(now) {
		return Claim{}, &Error{Code: CodeChannelBusy, Message: "too many deliveries claimed", Retryable: true}
	}
	s.addClaim(k, mine)
	s.compact()
	return Claim{State: ClaimAcquired}, nil
}

// claimRoom reports whether one more claim fits under Cap, first removing
// the claims whose lease ended more than TTL ago when it is full.
func (s *memoryCompletedStore) claimRoom(now time.Time) bool {
	if len(s.claims) < s.capacity {
		return true
	}
	for ck, c := range s.claims {
		if !now.Before(c.until.Add(s.ttl)) {
			s.deleteClaim(ck)
		}
	}
	return len(s.claims) < s.capacity
}

func (s *memoryCompletedStore) addClaim(k completedKey, c claimRecord) {
	if s.claims == nil {
		s.claims = map[completedKey]claimRecord{}
	}
	s.claims[k] = c
	s.claimIndex.add(k)
}

func (s *memoryCompletedStore) deleteClaim(k completedKey) {
	if _, ok := s.claims[k]; ok {
		delete(s.claims, k)
		s.claimsRemoved++
		s.claimIndex.remove(k)
	}
}

// handoverClaims copies the claims of from that are not yet due for
// removal to to, as they are, except where to has a claim of its own, up
// to MaxHandoverRecords and while Cap has room.
func (s *memoryCompletedStore) handoverClaims(now time.Time, from, to string) {
	n := 0
	for id := range s.claimIndex.of(from) {
		c := s.claims[completedKey{from, id}]
		nk := completedKey{to, id}
		if _, ok := s.claims[nk]; ok || !now.Before(c.until.Add(s.ttl)) {
			continue
		}
		if n >= MaxHandoverRecords || !s.claimRoom(now) {
			return
		}
		s.addClaim(nk, c)
		n++
	}
}

// Begin implements ClaimStarter.
func (s *memoryCompletedStore) Begin(_ context.Context, channelID, messageID, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := completedKey{channelID, messageID}
	if c, ok := s.claims[k]; ok && c.owner == owner && !c.begun {
		c.begun = true
		s.claims[k] = c
	}
	return nil
}

// Release implements ClaimStore.
func (s *memoryCompletedStore) Release(_ context.Context, channelID, messageID, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := completedKey{channelID, messageID}
	if c, ok := s.claims[k]; ok && c.owner == owner {
		s.deleteClaim(k)
	}
	return nil
}

// inline declares the in-memory completed store inline (storeoffreader.go):
// its calls do no I/O and never wait on their context.
func (*memoryCompletedStore) inline() {}
