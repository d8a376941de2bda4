package imv2_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/internal/benchcpu"
)

// countingTarget is a StreamingTarget that counts and signals the final.
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
		toC, toX := imv2test.NewInMemoryTransports()
		defer toC.Close()
		target := &countingTarget{done: make(chan struct{}, 1)}
		neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
		x, err := imv2.NewChannel("cch_1", imv2.RoleXAgent, neg, toC, imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer x.Close()
		c, err := imv2.NewChannel("cch_1", imv2.RoleConnector, neg, toX, target, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		toC.Attach(x) // acks from the Connector
		toX.Attach(c) // deltas and finals from xAgent
		ctx := context.Background()
		b.ResetTimer()
		defer benchcpu.Measure(b)()
		for range b.N {
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
