package imv2

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCompletedFlood pushes distinct message_ids through a completed
// store capped at 10,000 and reports the peak heap: it must stay flat
// whatever the number of IDs.
func BenchmarkCompletedFlood(b *testing.B) {
	for _, ids := range []int{100_000, 1_000_000} {
		b.Run("ids-"+strconv.Itoa(ids), func(b *testing.B) {
			var peak, live uint64
			for range b.N {
				runtime.GC()
				s := newMemoryCompletedStore(10_000, time.Hour, nil)
				var ms runtime.MemStats
				var fp Fingerprint
				ctx := context.Background()
				for i := range ids {
					id := fmt.Sprintf("msg_%012d", i)
					fp[0] = byte(i)
					_ = s.Record(ctx, "cch_1", id, fp)
					if i%1000 == 0 { // often enough to see each GC cycle's top
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapAlloc)
					}
				}
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
				if s.Len() > 10_000 {
					b.Fatalf("store holds %d", s.Len())
				}
				// What stays: the peak above also depends on how many
				// GC cycles the run saw (2 at 100,000 IDs, 8 at 1,000,000).
				runtime.GC()
				runtime.ReadMemStats(&ms)
				live = max(live, ms.HeapAlloc)
				runtime.KeepAlive(s)
			}
			b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
			b.ReportMetric(float64(live)/(1<<20), "MiB-live")
		})
	}
}
