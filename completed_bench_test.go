package imv2_test

import (
	"context"
	"fmt"
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
