package imv2_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
)

// fullCompletedStore returns the memory completed store holding 100,000
// records: 1,000 channels of 100 messages.
func fullCompletedStore(b *testing.B) imv2.ClaimStore {
	b.Helper()
	ctx := context.Background()
	s := imv2.NewMemoryCompletedStore(100_000, 0, fakeclock.New(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)))
	for ch := range 1000 {
		for m := range 100 {
			if err := s.Record(ctx, fmt.Sprintf("cch_%d", ch), fmt.Sprintf("msg_%d", m), imv2.Fingerprint{byte(m)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// BenchmarkMemoryCompletedStore_Handover: the cost of the Handover every
// channel.open naming an unknown ID makes, in a full store: from an ID the
// store never saw (a peer-chosen string), and a repeat of one channel's
// handover of its 100 records.
func BenchmarkMemoryCompletedStore_Handover(b *testing.B) {
	ctx := context.Background()
	b.Run("UnknownFrom", func(b *testing.B) {
		s := fullCompletedStore(b)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if err := s.Handover(ctx, "cch_unknown", "cch_new"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Known100Repeated", func(b *testing.B) {
		s := fullCompletedStore(b)
		b.ResetTimer()
		for b.Loop() {
			if err := s.Handover(ctx, "cch_500", "cch_new"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemoryCompletedStore_Deliver: what a delivered message costs a
// full store (100,000 records): the Claim before the Target and the
// Record after it, each evicting the oldest record; against a Go map with
// a ring of keys doing the same lookups, inserts and evictions (no claims,
// no index by channel), the store a first version would write.
func BenchmarkMemoryCompletedStore_Deliver(b *testing.B) {
	ctx := context.Background()
	const ch = "cch_00000000-0000-4000-8000-000000000000"
	ids := make([]string, 1<<16) // fresh message IDs, made before the timer
	for i := range ids {
		ids[i] = imv2.NewMessageID()
	}
	b.Run("sdk", func(b *testing.B) {
		s := fullCompletedStore(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			id := ids[i&(len(ids)-1)] + strconv.Itoa(i>>16) // unique, as every message's is
			if _, err := s.Claim(ctx, ch, id, imv2.Fingerprint{1}, "owner", time.Minute); err != nil {
				b.Fatal(err)
			}
			if err := s.Record(ctx, ch, id, imv2.Fingerprint{1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		type key struct{ ch, id string }
		m := make(map[key]imv2.Fingerprint, 100_000)
		ring := make([]key, 100_000)
		for i := range ring {
			ring[i] = key{fmt.Sprintf("cch_%d", i/100), fmt.Sprintf("msg_%d", i%100)}
			m[ring[i]] = imv2.Fingerprint{}
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k := key{ch, ids[i&(len(ids)-1)] + strconv.Itoa(i>>16)}
			if _, ok := m[k]; ok {
				b.Fatal("seen")
			}
			if _, ok := m[k]; ok {
				b.Fatal("seen")
			}
			old := &ring[i%len(ring)]
			delete(m, *old)
			m[k], *old = imv2.Fingerprint{1}, k
		}
	})
}
