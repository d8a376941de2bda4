package imv2_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/benchcpu"
)

// countingTarget shows drafts (UpdateDraft) and counts and signals the final.
type countingTarget struct {
	drafts int
	done   chan struct{}
}

func (c *countingTarget) PostMessage(context.Context, string, *imv2.ChatMessage) error {
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
				raw, _ := json.Marshal(envelope{Schema: imv2.PacketSchema, PacketID: imv2.NewPacketID(), ConnectorChannelID: "cch_1", Type: imv2.TypeChatMessageDelta, Time: 1, Payload: payload})
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
func newDeltaPair(b *testing.B) (*imv2.Channel, *countingTarget) {
	b.Helper()
	toC, toX := imv2test.NewInMemoryTransports()
	b.Cleanup(func() { _ = toC.Close() })
	target := &countingTarget{done: make(chan struct{}, 1)}
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	x, err := imv2.NewChannel("cch_1", imv2.RoleXAgent, neg, toC, imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.Close() })
	c, err := imv2.NewChannel("cch_1", imv2.RoleConnector, neg, toX, target, nil)
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
func streamReply(ctx context.Context, b *testing.B, x *imv2.Channel, target *countingTarget, n int) {
	r := x.NewReply("")
	for range n {
		if err := r.Delta(ctx, "token "); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Final(ctx, imv2.ChatMessage{Text: "final"}); err != nil {
		b.Fatal(err)
	}
	<-target.done
}

// BenchmarkDeltaCost: the cost of one delta in a stream of 100 and of
// 10,000 deltas (sdk path as in BenchmarkDeltaStream), reported per delta
// (ns/delta): a stream's state must not make a delta's cost grow with the
// deltas before it. The goal: 10,000 ≤ 1.2× 100.
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
