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
}

var _ ClaimStore = (*memoryCompletedStore)(nil)

// Claim implements ClaimStore. In memory a claim cannot outlive its
// process, so an orphan is a claim whose lease ran out (its owner hangs or
// its Record failed) or one owner already holds. At most Cap claims are
// held; when full, claims whose lease ended more than TTL ago go first,
// and a Claim that still finds no room fails retryable (channel_busy).
func (s *memoryCompletedStore) Claim(_ context.Context, channelID, messageID string, fp Fingerprint, owner string, lease time.Duration) (Claim, error) {
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
		s.claims[k] = mine
		return Claim{State: ClaimOrphaned, Fingerprint: old.fp, Owner: old.owner}, nil
	}
	if s.claims == nil {
		s.claims = map[completedKey]claimRecord{}
	}
	if len(s.claims) >= s.capacity {
		for ck, c := range s.claims {
			if !now.Before(c.until.Add(s.ttl)) {
				delete(s.claims, ck)
			}
		}
		if len(s.claims) >= s.capacity {
			return Claim{}, &Error{Code: CodeChannelBusy, Message: "too many deliveries claimed", Retryable: true}
		}
	}
	s.claims[k] = mine
	return Claim{State: ClaimAcquired}, nil
}

// Release implements ClaimStore.
func (s *memoryCompletedStore) Release(_ context.Context, channelID, messageID, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := completedKey{channelID, messageID}
	if c, ok := s.claims[k]; ok && c.owner == owner {
		delete(s.claims, k)
	}
	return nil
}
