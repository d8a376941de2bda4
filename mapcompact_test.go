package imv2

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestMemoryCompletedStore_S6_ChurnedMapsAreRebuilt: claims that come and
// go with every message, on channels that come and go, never leave their
// maps with more removals behind them than the rebuild bound
// (mapcompact.go), so they do not grow with the messages seen.
func TestMemoryCompletedStore_S6_ChurnedMapsAreRebuilt(t *testing.T) {
	s := newMemoryCompletedStore(100, time.Hour, nil)
	ctx := context.Background()
	for i := range 20_000 {
		ch, id := "cch_"+strconv.Itoa(i/3), "m"+strconv.Itoa(i)
		if _, err := s.Claim(ctx, ch, id, Fingerprint{}, "me", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, ch, id, Fingerprint{}); err != nil {
			t.Fatal(err)
		}
		if churned(s.claimsRemoved, len(s.claims)) || churned(s.claimIndex.removed, s.claimIndex.n+len(s.claimIndex.m)) || churned(s.lru.chanDel, len(s.lru.chans)) {
			t.Fatalf("message %d: claims %d removals for %d, claim index %d for %d, channels %d for %d", i,
				s.claimsRemoved, len(s.claims), s.claimIndex.removed, s.claimIndex.n, s.lru.chanDel, len(s.lru.chans))
		}
		if i%2 == 0 {
			if err := s.DropChannel(ctx, ch); err != nil {
				t.Fatal(err)
			}
		}
	}
}
