package dataplane

import (
	"context"
	"errors"
	"testing"

	"github.com/xagentkit/imv2"
	"pgregory.net/rapid"
)

// The Delivery registry as a state machine: whatever the order of sends,
// their returns (concurrent sends of one final among them), failed sends, handovers, outcomes (also duplicate and late ones) and
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
			sending int  // its sends in flight
			sent    bool // one of them succeeded: the final is pending
			held    bool // a caller got the handle back
		}
		var all []*model      // the handles callers hold
		var inflight []*model // sends that have not returned (nil: sent after Close)
		open := map[deliveryKey]*model{}
		chans := []string{"c1", "c2", "c3"}
		mids := []string{"m1", "m2", "m3", "m4"}
		closed := false
		t.Repeat(map[string]func(*rapid.T){
			"send": func(t *rapid.T) {
				ch, mid := rapid.SampledFrom(chans).Draw(t, "ch"), rapid.SampledFrom(mids).Draw(t, "mid")
				d := ds.add(ch, mid)
				k := deliveryKey{ch, mid}
				switch {
				case closed:
					if !errors.Is(d.err, imv2.ErrClosed) || ds.open[k] == d {
						t.Fatalf("a send after Close got a live handle")
					}
					inflight = append(inflight, nil)
				case open[k] != nil:
					if open[k].d != d {
						t.Fatalf("a final resent while pending, or sent twice at once, must share its handle")
					}
					open[k].sending++
					inflight = append(inflight, open[k])
				default:
					if d.Done() == nil || ds.open[k] != d {
						t.Fatalf("a new final got no registered handle")
					}
					m := &model{d: d, channel: ch, sending: 1}
					open[k] = m
					inflight = append(inflight, m)
				}
			},
			"sendReturns": func(t *rapid.T) {
				if len(inflight) == 0 {
					return
				}
				i := rapid.IntRange(0, len(inflight)-1).Draw(t, "which")
				m := inflight[i]
				inflight = append(inflight[:i], inflight[i+1:]...)
				fails := rapid.Bool().Draw(t, "sendFails")
				if m == nil {
					return // sent after Close: the handle was never registered
				}
				ds.finish(m.d, !fails)
				if k := (deliveryKey{m.channel, m.d.MessageID()}); open[k] == m {
					m.sending--
					m.sent = m.sent || !fails
					if m.sending == 0 && !m.sent {
						delete(open, k)
					}
				}
				if !fails && !m.held {
					m.held = true // the caller holds the handle now
					all = append(all, m)
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
