package dataplane

import (
	"context"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/benchcpu"
	"github.com/xagentkit/imv2/state"
)

// scaleFleet is one process on the xAgent side serving connectors
// Connectors (each a Server behind its own loopback listener, in this
// process too) with channels channels each: one Client per Connector.
type scaleFleet struct {
	srvs    []*Server
	hss     []*httptest.Server
	clients []*Client
	chans   [][]string // per client, its channel IDs
}

func (f *scaleFleet) close() {
	for _, c := range f.clients {
		_ = c.Close()
	}
	for i := range f.srvs {
		_ = f.srvs[i].Close()
		f.hss[i].Close()
	}
}

// newScaleFleet starts the Connectors, dials them and opens the
// channels; heapPerChannel is the live heap the Clients and their
// channels added (both sides' state: the Connectors live in the process
// too), per channel.
func newScaleFleet(b testing.TB, connectors, channels int) (f *scaleFleet, heapPerChannel float64) {
	b.Helper()
	noop := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
	f = &scaleFleet{}
	for range connectors {
		srv, err := NewServer(ServerConfig{Card: testCard(), NewTarget: func(string) imv2.Target { return noop }})
		if err != nil {
			b.Fatal(err)
		}
		f.srvs = append(f.srvs, srv)
		f.hss = append(f.hss, httptest.NewServer(withCard(testCard(), srv)))
	}
	before := liveHeap()
	ctx := context.Background()
	for i := range connectors {
		c, err := Dial(ctx, ClientConfig{URL: f.hss[i].URL, Target: noop, Store: state.NewMemoryChannelStore(channels)})
		if err != nil {
			f.close()
			b.Fatal(err)
		}
		f.clients = append(f.clients, c)
		var ids []string
		for range channels {
			ch, err := c.OpenChannel(ctx, "")
			if err != nil {
				f.close()
				b.Fatal(err)
			}
			ids = append(ids, ch)
		}
		f.chans = append(f.chans, ids)
	}
	return f, float64(liveHeap()-before) / float64(connectors*channels)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// scaleWindow bounds the finals a sender of drive has outstanding.
const scaleWindow = 256

// drive sends perChannel finals on every channel of f at once (each
// channel's sender keeps up to scaleWindow outcomes outstanding) and
// returns the finals acked, the wall time and the process's CPU time.
func (f *scaleFleet) drive(b testing.TB, perChannel int) (acked int, wall, cpu time.Duration) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	cpu0, _ := benchcpu.ProcessCPU()
	t0 := time.Now()
	for i, c := range f.clients {
		for _, id := range f.chans[i] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// At most scaleWindow outcomes outstanding: the pending
				// store's per-channel cap is 1,000.
				var ds []*Delivery
				n := 0
				wait := func() {
					if _, err := ds[0].Wait(ctx); err == nil {
						n++
					}
					ds = ds[1:]
				}
				for range perChannel {
					if len(ds) == scaleWindow {
						wait()
					}
					d, err := c.Send(ctx, id, benchFinal)
					if err != nil {
						b.Error(err)
						return
					}
					ds = append(ds, d)
				}
				for len(ds) > 0 {
					wait()
				}
				mu.Lock()
				acked += n
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	wall = time.Since(t0)
	cpu1, _ := benchcpu.ProcessCPU()
	return acked, wall, cpu1 - cpu0
}

// BenchmarkXAgentScale: the xAgent side at the scale xAgent runs it, one
// process serving 100 Connectors × 10 channels over loopback, against one
// Connector × one channel in the same run. Both sides of every
// connection are in the process (the Connectors are Servers here), so
// the CPU is the whole round trip's. Reported: finals acked per second
// and CPU per acked final for both, their ratios (large ÷ small), and the
// live heap per channel the 1,000 channels added (both sides' state, the
// Clients' connections included).
//
//	go test -run '^$' -bench XAgentScale -benchtime 1x ./dataplane
func BenchmarkXAgentScale(b *testing.B) {
	const (
		smallFinals = 4000 // on the one channel
		largeFinals = 100  // on each of the 1,000 channels
	)
	for b.Loop() {
		small, _ := newScaleFleet(b, 1, 1)
		sAcked, sWall, sCPU := small.drive(b, smallFinals)
		small.close()
		large, heap := newScaleFleet(b, 100, 10)
		lAcked, lWall, lCPU := large.drive(b, largeFinals)
		large.close()
		if sAcked != smallFinals || lAcked != 1000*largeFinals {
			b.Fatalf("acked %d of %d and %d of %d", sAcked, smallFinals, lAcked, 1000*largeFinals)
		}
		sRate, lRate := float64(sAcked)/sWall.Seconds(), float64(lAcked)/lWall.Seconds()
		sPer, lPer := float64(sCPU.Microseconds())/float64(sAcked), float64(lCPU.Microseconds())/float64(lAcked)
		b.ReportMetric(sRate, "1x1-finals/s")
		b.ReportMetric(lRate, "100x10-finals/s")
		b.ReportMetric(lRate/sRate, "throughput-ratio")
		b.ReportMetric(sPer, "1x1-cpu-µs/final")
		b.ReportMetric(lPer, "100x10-cpu-µs/final")
		b.ReportMetric(lPer/sPer, "cpu-per-final-ratio")
		b.ReportMetric(heap, "heap-B/channel")
	}
}

// TestXAgentScale_Fleet checks the benchmark's machinery on a small
// fleet: every final sent on every channel is acked, and the channels
// show on the heap.
func TestXAgentScale_Fleet(t *testing.T) {
	f, heap := newScaleFleet(t, 3, 2)
	defer f.close()
	if heap <= 0 {
		t.Fatalf("the channels added no heap: %v", heap)
	}
	if acked, _, _ := f.drive(t, 5); acked != 3*2*5 {
		t.Fatalf("acked %d of %d", acked, 3*2*5)
	}
}
