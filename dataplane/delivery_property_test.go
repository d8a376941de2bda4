package dataplane

import (
	"context"
	"errors"
	"testing"

	"github.com/xagentkit/imv2"
	"pgregory.net/rapid"
)

// The Delivery registry as a state machine: whatever the order of sends,
// failed sends, handovers, outcomes (also duplicate and late ones) and
// Close, every handle resolves exactly once with the outcome of its final
// on the channel it last moved to, and nothing resolved stays registered.
func TestDelivery_S1_S3_RegistryProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ds deliveries
		type model struct {
			d       *Delivery
			channel string
			status  imv2.AckStatus
			err     error
			done    bool
		}
		var all []*model
		open := map[deliveryKey]*model{}
		chans := []string{"c1", "c2", "c3"}
		mids := []string{"m1", "m2", "m3", "m4"}
		closed := false
		t.Repeat(map[string]func(*rapid.T){
			"send": func(t *rapid.T) {
				ch, mid := rapid.SampledFrom(chans).Draw(t, "ch"), rapid.SampledFrom(mids).Draw(t, "mid")
				d, fresh := ds.add(ch, mid)
				k := deliveryKey{ch, mid}
				switch {
				case closed:
					if fresh || !errors.Is(d.err, imv2.ErrClosed) {
						t.Fatalf("a send after Close got a live handle")
					}
				case open[k] != nil:
					if fresh || open[k].d != d {
						t.Fatalf("a final resent while pending must share its handle")
					}
				default:
					if !fresh {
						t.Fatalf("a new final got an old handle")
					}
					m := &model{d: d, channel: ch}
					open[k] = m
					all = append(all, m)
					if rapid.Bool().Draw(t, "sendFails") {
						ds.drop(ch, d)
						delete(open, k)
						all = all[:len(all)-1]
					}
				}
			},
			"handover": func(t *rapid.T) {
				from, to, mid := rapid.SampledFrom(chans).Draw(t, "from"), rapid.SampledFrom(chans).Draw(t, "to"), rapid.SampledFrom(mids).Draw(t, "mid")
				if from == to || open[deliveryKey{to, mid}] != nil {
					return // a handover goes to a new channel ID, where the message is not pending
				}
				ds.move(from, to, mid)
				if m := open[deliveryKey{from, mid}]; m != nil {
					delete(open, deliveryKey{from, mid})
					m.channel = to
					open[deliveryKey{to, mid}] = m
				}
			},
			"outcome": func(t *rapid.T) {
				ch, mid := rapid.SampledFrom(chans).Draw(t, "ch"), rapid.SampledFrom(mids).Draw(t, "mid")
				st := rapid.SampledFrom([]imv2.AckStatus{imv2.AckAccepted, imv2.AckDuplicate, imv2.AckRejected}).Draw(t, "status")
				var err error
				if st == imv2.AckRejected {
					err = &imv2.Error{Code: imv2.CodeTargetRejected}
				}
				ds.resolve(ch, mid, st, err)
				if m := open[deliveryKey{ch, mid}]; m != nil {
					m.status, m.err, m.done = st, err, true
					delete(open, deliveryKey{ch, mid})
				}
			},
			"close": func(t *rapid.T) {
				ds.closeAll()
				for _, m := range open {
					m.err, m.done = imv2.ErrClosed, true
				}
				clear(open)
				closed = true
			},
			"": func(t *rapid.T) {
				if len(ds.open) != len(open) {
					t.Fatalf("%d handles registered, %d finals without an outcome", len(ds.open), len(open))
				}
				for _, m := range all {
					select {
					case <-m.d.Done():
						if !m.done {
							t.Fatalf("%s resolved without an outcome", m.d.MessageID())
						}
						st, err := m.d.Wait(context.Background())
						if st != m.status || !errors.Is(err, m.err) && err != m.err {
							t.Fatalf("%s: Wait = %s, %v; want %s, %v", m.d.MessageID(), st, err, m.status, m.err)
						}
						if m.d.ChannelID() != m.channel {
							t.Fatalf("%s: outcome from %q, want %q", m.d.MessageID(), m.d.ChannelID(), m.channel)
						}
					default:
						if m.done {
							t.Fatalf("%s has an outcome but Wait would block", m.d.MessageID())
						}
					}
				}
			},
		})
	})
}
