package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/imv2test"
)

// countTarget counts what reaches a Target and signals every n-th.
type countTarget struct {
	n    atomic.Int64
	want atomic.Int64
	done chan struct{}
}

func (c *countTarget) PostMessage(context.Context, string, *imv2.ChatMessage) error {
	if c.n.Add(1) >= c.want.Load() {
		select {
		case c.done <- struct{}{}:
		default: // a wake-up is already waiting
		}
	}
	return nil
}

// BenchmarkConnectorMessages is the messages per second one Connector
// sustains on each store: a Connector Channel and an xAgent Channel over
// the in-memory transports (every packet encoded and decoded), the
// Connector's pending and completed state in the store named, xAgent's in
// memory. "send" is user messages the Connector sends (pending Add, ack,
// Remove per message); "receive" is finals it receives (Lookup, Claim on
// PostgreSQL, Target call, Record per message). b.N messages are in
// flight at once, bounded by the send window (MaxUnacked).
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
	for _, dir := range []string{"send", "receive"} {
		for _, st := range stores {
			b.Run(dir+"/"+st.name, func(b *testing.B) {
				ctx := context.Background()
				pending, completed := st.open(b)
				platform := &countTarget{done: make(chan struct{}, 1)}
				agent := &countTarget{done: make(chan struct{}, 1)}
				tc, tx := imv2test.NewInMemoryTransports()
				conn, err := imv2.NewChannel("cch_bench", imv2.RoleConnector, neg, tc, platform, &imv2.Options{Pending: pending, Completed: completed})
				if err != nil {
					b.Fatal(err)
				}
				xag, err := imv2.NewChannel("cch_bench", imv2.RoleXAgent, neg, tx, agent, &imv2.Options{})
				if err != nil {
					b.Fatal(err)
				}
				tc.Attach(conn)
				tx.Attach(xag)
				b.Cleanup(func() { _ = tc.Close(); _ = conn.Close(); _ = xag.Close() })
				sender, sink := conn, agent
				if dir == "receive" {
					sender, sink = xag, platform
				}
				b.ReportAllocs()
				i := 0
				began := time.Now()
				for b.Loop() {
					m := imv2.ChatMessage{MessageID: "m-" + strconv.Itoa(i), Text: "Here is the report you asked for."}
					i++
					sink.want.Store(int64(i))
					for {
						_, err := sender.Send(ctx, m)
						if err == nil {
							break
						}
						if !errors.Is(err, &imv2.Error{Code: imv2.CodePendingFull}) {
							b.Fatal(err)
						}
						time.Sleep(100 * time.Microsecond)
					}
				}
				for sink.n.Load() < int64(i) {
					select {
					case <-sink.done:
					case <-time.After(time.Minute):
						b.Fatalf("%d of %d delivered", sink.n.Load(), i)
					}
				}
				b.ReportMetric(float64(i)/time.Since(began).Seconds(), "msgs/s")
			})
		}
	}
}
