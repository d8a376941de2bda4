package imv2

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/xagentkit/imv2/internal/benchcpu"
)

// countingTarget is a StreamingTarget that counts and signals the final.
type countingTarget struct {
	drafts int
	done   chan struct{}
}

func (c *countingTarget) PostMessage(context.Context, string, *ChatMessage) error {
	c.done <- struct{}{}
	return nil
}

func (c *countingTarget) UpdateDraft(context.Context, string, string, string) error {
	c.drafts++
	return nil
}

// BenchmarkDeltaStream: one assistant reply of 1,000 deltas and its final
// through an xAgent channel and a Connector channel on the in-memory
// transport into a streaming Target (sdk), against marshal + unmarshal of
// the same 1,000 packets with no state (raw).
func BenchmarkDeltaStream(b *testing.B) {
	const n = 1000
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		x, target := newDeltaPair(b)
		ctx := context.Background()
		b.ResetTimer()
		defer benchcpu.Measure(b)()
		for range b.N {
			streamReply(ctx, b, x, target, n)
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		type delta struct {
			MessageID string `json:"message_id"`
			Sequence  int64  `json:"sequence"`
			Text      string `json:"text"`
		}
		type envelope struct {
			Schema             string          `json:"schema"`
			PacketID           string          `json:"packet_id"`
			ConnectorChannelID string          `json:"connector_channel_id"`
			Type               string          `json:"type"`
			Time               int64           `json:"time"`
			Payload            json.RawMessage `json:"payload"`
		}
		defer benchcpu.Measure(b)()
		for range b.N {
			for i := range n + 1 {
				payload, _ := json.Marshal(delta{MessageID: "msg_1", Sequence: int64(i + 1), Text: "token "})
				raw, _ := json.Marshal(envelope{Schema: PacketSchema, PacketID: NewPacketID(), ConnectorChannelID: "cch_1", Type: TypeChatMessageDelta, Time: 1, Payload: payload})
				var e envelope
				var d delta
				if json.Unmarshal(raw, &e) != nil || json.Unmarshal(e.Payload, &d) != nil {
					b.Fatal("decode")
				}
			}
		}
	})
}

// newDeltaPair is an xAgent Channel and a Connector Channel on the
// in-memory transport, the Connector's Target streaming; Cleanup closes
// them.
func newDeltaPair(b *testing.B) (*Channel, *countingTarget) {
	b.Helper()
	toC, toX := NewInMemoryTransports()
	b.Cleanup(func() { _ = toC.Close() })
	target := &countingTarget{done: make(chan struct{}, 1)}
	neg := imNegotiated()
	x, err := NewChannel("cch_1", RoleXAgent, neg, toC, TargetFunc(func(context.Context, string, *ChatMessage) error { return nil }), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.Close() })
	c, err := NewChannel("cch_1", RoleConnector, neg, toX, target, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	toC.Attach(x) // acks from the Connector
	toX.Attach(c) // deltas and finals from xAgent
	return x, target
}

// streamReply sends one reply of n deltas and its final and waits for the
// final to reach the Target.
func streamReply(ctx context.Context, b *testing.B, x *Channel, target *countingTarget, n int) {
	r := x.NewReply("")
	for range n {
		if err := r.Delta(ctx, "token "); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Final(ctx, ChatMessage{Text: "final"}); err != nil {
		b.Fatal(err)
	}
	<-target.done
}

// BenchmarkDeltaCost: the cost of one delta in a stream of 100 and of
// 10,000 deltas (sdk path as in BenchmarkDeltaStream), reported per delta
// (ns/delta, cpu-ns/delta): a stream's state must not make a delta's
// cost grow with the deltas before it. The goal: 10,000 ≤ 1.2× 100.
func BenchmarkDeltaCost(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run("deltas-"+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			x, target := newDeltaPair(b)
			ctx := context.Background()
			b.ResetTimer()
			report := benchcpu.Measure(b)
			start := time.Now()
			for range b.N {
				streamReply(ctx, b, x, target, n)
			}
			elapsed := time.Since(start)
			report()
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*n), "ns/delta")
		})
	}
}

// BenchmarkCompletedFlood pushes distinct message_ids through a completed
// store capped at 10,000 and reports the peak heap: it must stay flat
// whatever the number of IDs.
func BenchmarkCompletedFlood(b *testing.B) {
	for _, ids := range []int{100_000, 1_000_000} {
		b.Run("ids-"+strconv.Itoa(ids), func(b *testing.B) {
			var peak uint64
			for range b.N {
				runtime.GC()
				s := NewMemoryCompletedStore(10_000, time.Hour, nil)
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
			}
			b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
		})
	}
}
