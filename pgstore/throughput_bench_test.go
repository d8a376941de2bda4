package pgstore_test

import (
	"context"
	"errors"
	"fmt"
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
	for _, dir := range []string{"send", "receive"} {
		for _, st := range stores {
			for _, channels := range []int{1, 100, 1000} {
				b.Run(dir+"/"+st.name+"/ch-"+strconv.Itoa(channels), func(b *testing.B) {
					pending, completed := st.open(b)
					r, err := newMessageRun(dir, pending, completed, 0, channels, max(1, b.N/channels))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(r.close)
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
					if err := r.run(context.Background()); err != nil {
						b.Fatal(err)
					}
					elapsed := time.Since(began)
					b.StopTimer()
					cpu()
					serverCPU()
					b.ReportMetric(float64(r.messages)/elapsed.Seconds(), "msgs/s")
					reportLatencies(b, r.latencies())
				})
			}
		}
	}
}

// messageRun is the workload of BenchmarkConnectorMessages on channels
// cch_bench_<first> to cch_bench_<first+channels-1>, per messages each,
// in one direction: a Connector and an xAgent Channel per channel over
// the in-memory transports, the Connector's state in pending and
// completed, xAgent's in memory.
type messageRun struct {
	senders  []*imv2.Channel
	clocks   []*ackClock
	closers  []func()
	messages int // over all channels
}

func newMessageRun(dir string, pending imv2.PendingStore, completed imv2.CompletedStore, first, channels, per int) (*messageRun, error) {
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	nop := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
	r := &messageRun{senders: make([]*imv2.Channel, channels), clocks: make([]*ackClock, channels), messages: channels * per}
	for c := range channels {
		id := "cch_bench_" + strconv.Itoa(first+c)
		r.clocks[c] = newAckClock(per)
		connObs, xagObs := imv2.Observer(r.clocks[c]), imv2.Observer(nil)
		if dir == "receive" {
			connObs, xagObs = nil, r.clocks[c]
		}
		tc, tx := imv2test.NewInMemoryTransports()
		conn, err := imv2.NewChannel(id, imv2.RoleConnector, neg, tc, nop,
			&imv2.Options{Pending: pending, Completed: completed, Observer: connObs})
		if err != nil {
			r.close()
			return nil, err
		}
		xag, err := imv2.NewChannel(id, imv2.RoleXAgent, neg, tx, nop, &imv2.Options{Observer: xagObs})
		if err != nil {
			_ = conn.Close()
			r.close()
			return nil, err
		}
		tc.Attach(conn)
		tx.Attach(xag)
		r.closers = append(r.closers, func() { _ = tc.Close(); _ = conn.Close(); _ = xag.Close() })
		r.senders[c] = conn
		if dir == "receive" {
			r.senders[c] = xag
		}
	}
	return r, nil
}

// run sends every channel's messages, the channels at once, each up to
// the send window in flight, and returns when every one is acked.
func (r *messageRun) run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(r.senders))
	for c, sender := range r.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range r.clocks[c].sent {
				m := imv2.ChatMessage{MessageID: "m-" + strconv.Itoa(i), Text: "Here is the report you asked for."}
				r.clocks[c].sent[i].Store(time.Now().UnixNano())
				for {
					_, err := sender.Send(ctx, m)
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
		return err
	}
	timeout := time.After(2 * time.Minute) // a guard against a hang
	for c, a := range r.clocks {
		select {
		case <-a.all:
		case <-timeout:
			return fmt.Errorf("channel %d: %d of %d acked", c, a.acked.Load(), a.want)
		}
	}
	return nil
}

// latencies are every message's time from Send to its ack, sorted.
func (r *messageRun) latencies() []time.Duration {
	var lat []time.Duration
	for _, a := range r.clocks {
		a.mu.Lock()
		lat = append(lat, a.lat...)
		a.mu.Unlock()
	}
	slices.Sort(lat)
	return lat
}

// close closes every channel and its transports.
func (r *messageRun) close() {
	for _, f := range r.closers {
		f()
	}
	r.closers = nil
}

// reportLatencies reports the median and the 99th percentile of lat,
// sorted, as p50-ns and p99-ns.
func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}
