package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/benchcpu"
)

// ackClock times each message of one channel from Send to its terminal
// ack, seen by the sender's Observer. Message IDs are "m-<index>".
type ackClock struct {
	sent  []atomic.Int64 // Unix ns before Send, by index
	lat   []time.Duration
	mu    sync.Mutex // guards lat
	acked atomic.Int64
	all   chan struct{} // closed when every message is acked
	want  int64
}

func newAckClock(n int) *ackClock {
	return &ackClock{sent: make([]atomic.Int64, n), lat: make([]time.Duration, 0, n), all: make(chan struct{}), want: int64(n)}
}

func (a *ackClock) Observe(e imv2.Event) {
	if e.Kind != imv2.EventAcked {
		return
	}
	i, err := strconv.Atoi(strings.TrimPrefix(e.MessageID, "m-"))
	if err != nil || i >= len(a.sent) {
		return
	}
	d := time.Duration(time.Now().UnixNano() - a.sent[i].Load())
	a.mu.Lock()
	a.lat = append(a.lat, d)
	a.mu.Unlock()
	if a.acked.Add(1) == a.want {
		close(a.all)
	}
}

// BenchmarkConnectorMessages is the messages per second one Connector
// sustains on each store, over 1, 100 and 1,000 channels sharing the
// store: per channel a Connector Channel and an xAgent Channel over the
// in-memory transports (every packet encoded and decoded), the
// Connector's pending and completed state in the store named, xAgent's in
// memory. "send" is user messages the Connector sends (pending Add, ack,
// Remove per message); "receive" is finals it receives (Lookup, Claim on
// a ClaimStore, Target call, Record per message). Each channel's sender
// sends its share of b.N messages one after another, up to the send
// window (MaxUnacked) in flight; the channels run at once. msgs/s counts
// terminal acks; p50-ns and p99-ns are the time from Send to the ack,
// queueing behind the window included. cpu-ns/op is this process's CPU
// time per message (the Connector, xAgent's side and the store's client),
// pg-cpu-ns/op the PostgreSQL server's: on a shared machine they move
// less with the load than msgs/s does.
func BenchmarkConnectorMessages(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) (imv2.PendingStore, imv2.CompletedStore)
	}{
		{"memory", func(*testing.B) (imv2.PendingStore, imv2.CompletedStore) {
			return imv2.NewMemoryPendingStore(0), imv2.NewMemoryCompletedStore(0, 0, nil)
		}},
		{"bolt", func(b *testing.B) (imv2.PendingStore, imv2.CompletedStore) {
			s := openBolt(b)
			return s.Pending(), s.Completed()
		}},
		{"postgres", func(b *testing.B) (imv2.PendingStore, imv2.CompletedStore) {
			s := openPG(b)
			return s.Pending(), s.Completed()
		}},
	}
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	nop := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
	for _, dir := range []string{"send", "receive"} {
		for _, st := range stores {
			for _, channels := range []int{1, 100, 1000} {
				b.Run(dir+"/"+st.name+"/ch-"+strconv.Itoa(channels), func(b *testing.B) {
					ctx := context.Background()
					pending, completed := st.open(b)
					per := max(1, b.N/channels)
					senders := make([]*imv2.Channel, channels)
					clocks := make([]*ackClock, channels)
					for c := range channels {
						id := "cch_bench_" + strconv.Itoa(c)
						clocks[c] = newAckClock(per)
						connObs, xagObs := imv2.Observer(clocks[c]), imv2.Observer(nil)
						if dir == "receive" {
							connObs, xagObs = nil, clocks[c]
						}
						tc, tx := imv2test.NewInMemoryTransports()
						conn, err := imv2.NewChannel(id, imv2.RoleConnector, neg, tc, nop,
							&imv2.Options{Pending: pending, Completed: completed, Observer: connObs})
						if err != nil {
							b.Fatal(err)
						}
						xag, err := imv2.NewChannel(id, imv2.RoleXAgent, neg, tx, nop, &imv2.Options{Observer: xagObs})
						if err != nil {
							b.Fatal(err)
						}
						tc.Attach(conn)
						tx.Attach(xag)
						b.Cleanup(func() { _ = tc.Close(); _ = conn.Close(); _ = xag.Close() })
						senders[c] = conn
						if dir == "receive" {
							senders[c] = xag
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					// The server's reading first: it walks /proc, which is
					// no part of this process's work per message.
					serverCPU := func() {}
					if st.name == "postgres" {
						serverCPU = measureServerCPU(b)
					}
					cpu := benchcpu.Measure(b)
					began := time.Now()
					var wg sync.WaitGroup
					errs := make(chan error, channels)
					for c := range channels {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := range per {
								m := imv2.ChatMessage{MessageID: "m-" + strconv.Itoa(i), Text: "Here is the report you asked for."}
								clocks[c].sent[i].Store(time.Now().UnixNano())
								for {
									_, err := senders[c].Send(ctx, m)
									if err == nil {
										break
									}
									if !errors.Is(err, &imv2.Error{Code: imv2.CodePendingFull}) {
										errs <- err
										return
									}
									time.Sleep(100 * time.Microsecond)
								}
							}
						}()
					}
					wg.Wait()
					close(errs)
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
					timeout := time.After(2 * time.Minute) // a guard against a hang
					for c, a := range clocks {
						select {
						case <-a.all:
						case <-timeout:
							b.Fatalf("channel %d: %d of %d acked", c, a.acked.Load(), per)
						}
					}
					elapsed := time.Since(began)
					b.StopTimer()
					cpu()
					serverCPU()
					var lat []time.Duration
					for _, a := range clocks {
						lat = append(lat, a.lat...)
					}
					slices.Sort(lat)
					b.ReportMetric(float64(per*channels)/elapsed.Seconds(), "msgs/s")
					b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
					b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
				})
			}
		}
	}
}
