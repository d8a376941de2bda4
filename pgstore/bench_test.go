package pgstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/benchcpu"
	"github.com/xagentkit/imv2/internal/storectx"
	"github.com/xagentkit/imv2/pgstore"
)

// The memory and bbolt stores are the baseline, measured in the same run
// (as in boltstore/bench_test.go). The PostgreSQL figures are one
// transaction per call over loopback TCP to the harness's server, with
// fsync and synchronous_commit on (the server's defaults).

func openBolt(b *testing.B) *boltstore.Store {
	b.Helper()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func openPG(b *testing.B) *pgstore.Store { return openStore(b, srv.NewDatabase(b), pgstore.Options{}) }

// BenchmarkCompletedRecordLookup records one new message_id and looks it
// up, as a receiver does per completed final.
func BenchmarkCompletedRecordLookup(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) imv2.CompletedStore
	}{
		{"memory", func(*testing.B) imv2.CompletedStore { return imv2.NewMemoryCompletedStore(0, 0, nil) }},
		{"bolt", func(b *testing.B) imv2.CompletedStore { return openBolt(b).Completed() }},
		{"postgres", func(b *testing.B) imv2.CompletedStore { return openPG(b) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			s := st.open(b)
			fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hello"})
			b.ReportAllocs()
			i := 0
			var lat latencies
			for b.Loop() {
				id := "0190f5b2-7c1e-7b3a-9f4e-" + strconv.Itoa(i)
				i++
				t0 := time.Now()
				if err := s.Record(ctx, "channel-1", id, fp); err != nil {
					b.Fatal(err)
				}
				if _, ok, err := s.Lookup(ctx, "channel-1", id); err != nil || !ok {
					b.Fatal(ok, err)
				}
				lat = append(lat, time.Since(t0))
			}
			lat.report(b)
		})
	}
}

// BenchmarkPendingAddRemove adds one message and removes it, as a sender
// does per acknowledged message.
func BenchmarkPendingAddRemove(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) imv2.PendingStore
	}{
		{"memory", func(*testing.B) imv2.PendingStore { return imv2.NewMemoryPendingStore(0) }},
		{"bolt", func(b *testing.B) imv2.PendingStore { return openBolt(b).Pending() }},
		{"postgres", func(b *testing.B) imv2.PendingStore { return openPG(b) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			s := st.open(b)
			e := imv2.PendingEntry{ChannelID: "channel-1", Created: time.Now(), Message: imv2.ChatMessage{
				Text:  "Here is the report you asked for.",
				Files: []imv2.File{{Type: imv2.FileFile, FileRef: "f_01J2ZK8Q", Filename: "report.pdf", ByteSize: 48213}},
			}}
			b.ReportAllocs()
			i := 0
			var lat latencies
			for b.Loop() {
				e.Message.MessageID = "0190f5b2-7c1e-7b3a-9f4e-" + strconv.Itoa(i)
				i++
				t0 := time.Now()
				if err := s.Add(ctx, e); err != nil {
					b.Fatal(err)
				}
				if err := s.Remove(ctx, e.ChannelID, e.Message.MessageID); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			lat.report(b)
		})
	}
}

// BenchmarkClaimRecord claims one new message_id and records it, as a
// receiver on a ClaimStore does per final: the claim before the Target
// call, the record after: one channel's path, each call alone in its
// group. cpu-ns/op and pg-cpu-ns/op are this process's and the server's
// CPU time per message.
func BenchmarkClaimRecord(b *testing.B) {
	ctx := context.Background()
	s := openPG(b)
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hello"})
	b.ReportAllocs()
	cpu, serverCPU := benchcpu.Measure(b), measureServerCPU(b)
	defer func() { cpu(); serverCPU() }()
	i := 0
	for b.Loop() {
		id := "0190f5b2-7c1e-7b3a-9f4e-" + strconv.Itoa(i)
		i++
		c, err := s.Claim(ctx, "channel-1", id, fp, "replica-1", time.Minute)
		if err != nil || c.State != imv2.ClaimAcquired {
			b.Fatal(c, err)
		}
		if err := s.Record(ctx, "channel-1", id, fp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimRecordConcurrent is BenchmarkClaimRecord on 100 channels
// at once, a message in flight on each, so the group commit shares its
// transactions among them as under a Connector's load: the store and its
// client alone, no Channel around them. Each call gets a context as a
// Channel's store call does (storectx: a deadline, made per call).
// cpu-ns/op and pg-cpu-ns/op are this process's and the server's CPU
// time per message.
func BenchmarkClaimRecordConcurrent(b *testing.B) {
	const channels = 100
	s := openPG(b)
	fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hello"})
	b.ReportAllocs()
	serverCPU := measureServerCPU(b)
	cpu := benchcpu.Measure(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, channels)
	for c := range channels {
		wg.Go(func() {
			ch := "cch_bench_" + strconv.Itoa(c)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				id := "m-" + strconv.FormatInt(i, 10)
				sctx := storectx.New(clock.System{}, context.Background(), 10*time.Second)
				cl, err := s.Claim(sctx, ch, id, fp, "replica-1", time.Minute)
				sctx.Release()
				if err == nil && cl.State != imv2.ClaimAcquired {
					err = fmt.Errorf("claim %s/%s: %+v", ch, id, cl)
				}
				if err == nil {
					sctx = storectx.New(clock.System{}, context.Background(), 10*time.Second)
					err = s.Record(sctx, ch, id, fp)
					sctx.Release()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu()
	serverCPU()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// latencies are the durations of a benchmark's iterations, reported as
// p50-ns and p99-ns beside ns/op (the mean).
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2]), "p50-ns")
	b.ReportMetric(float64(l[len(l)*99/100]), "p99-ns")
}
