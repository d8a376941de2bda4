package boltstore_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
)

// The memory stores are the baseline, measured in the same run. The bolt
// figures include one fsync per Add, Remove and Record, which is the point
// of the store (S8); they are not run with NoSync.

func openBench(b *testing.B) *boltstore.Store {
	b.Helper()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkCompletedRecordLookup records one new message_id and looks it
// up, as a receiver does per completed final (Lookup first, Record after
// the target call; here in the order that makes the Lookup hit).
func BenchmarkCompletedRecordLookup(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) imv2.CompletedStore
	}{
		{"memory", func(*testing.B) imv2.CompletedStore { return imv2.NewMemoryCompletedStore(0, 0, nil) }},
		{"bolt", func(b *testing.B) imv2.CompletedStore { return openBench(b).Completed() }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			s := st.open(b)
			fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hello"})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := "0190f5b2-7c1e-7b3a-9f4e-" + strconv.Itoa(i)
				i++
				if err := s.Record(ctx, "channel-1", id, fp); err != nil {
					b.Fatal(err)
				}
				if _, ok, err := s.Lookup(ctx, "channel-1", id); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
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
		{"bolt", func(b *testing.B) imv2.PendingStore { return openBench(b).Pending() }},
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
			for b.Loop() {
				e.Message.MessageID = "0190f5b2-7c1e-7b3a-9f4e-" + strconv.Itoa(i)
				i++
				if err := s.Add(ctx, e); err != nil {
					b.Fatal(err)
				}
				if err := s.Remove(ctx, e.ChannelID, e.Message.MessageID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeliveryStoreCalls is the store work of one inbound final: the
// path without claims (Lookup, then Record after the post) against the
// path with them (Claim, then Record), on memory and on bolt. A bolt
// Claim is one more fsync per message: the price of never posting twice.
func BenchmarkDeliveryStoreCalls(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) imv2.ClaimStore
	}{
		{"memory", func(*testing.B) imv2.ClaimStore { return imv2.NewMemoryCompletedStore(0, 0, nil) }},
		{"bolt", func(b *testing.B) imv2.ClaimStore { return openBench(b) }},
	}
	for _, st := range stores {
		for _, claim := range []bool{false, true} {
			name := st.name + "/lookup-record"
			if claim {
				name = st.name + "/claim-record"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				s := st.open(b)
				fp := imv2.FingerprintOf(&imv2.ChatMessage{Text: "hello"})
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					id := "0190f5b2-7c1e-7b3a-9f4e-" + strconv.Itoa(i)
					i++
					if claim {
						if c, err := s.Claim(ctx, "channel-1", id, fp, "owner", time.Minute); err != nil || c.State != imv2.ClaimAcquired {
							b.Fatal(c.State, err)
						}
					} else if _, ok, err := s.Lookup(ctx, "channel-1", id); err != nil || ok {
						b.Fatal(ok, err)
					}
					if err := s.Record(ctx, "channel-1", id, fp); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
