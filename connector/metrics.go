package connector

import (
	"net/http"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/answered"
	"github.com/xagentkit/imv2/internal/codelabel"
	"github.com/xagentkit/imv2/internal/promtext"
)

// The kit's default /metrics (Options.Advanced.Metrics replaces it). The
// series of the metrics module, from the same Observer events, plus what
// only the kit sees: store errors, connections, channels, the send→ack
// latency, listener failures, the messages waiting for the send window,
// build_info and the Go and process series. Every label is bounded:
// kinds, statuses, outcomes, stores and operations are fixed sets; codes
// come from the peer and are bounded by codelabel.

// AckLatencyBuckets are the upper bounds, in seconds, of
// imv2_ack_latency_seconds: from xAgent on the same host to a backlog
// resent after a reconnect.
var ackLatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// targetBuckets are those of imv2_target_call_duration_seconds, as the
// metrics module's TargetBuckets.
var targetBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// maxTracked bounds the outbound messages the pending gauges follow at
// once; past it a new one is not counted (the stores cap what is pending
// far below it by default).
const maxTracked = 1 << 16

// kitMetrics is the Observer, store wrapper and HTTP handler of the
// default /metrics.
type kitMetrics struct {
	reg   promtext.Registry
	clock clock.Clock
	codes codelabel.Codes

	events, acksReceived, acksSent, deltasRejected, storeErrors *promtext.Vec
	sent, resends, listenerFailures, connections                *promtext.Value
	target, ackLatency                                          *promtext.HistogramVec

	mu  sync.Mutex
	out map[finalKey]*outState // outbound messages pending here
}

// outState is one outbound message: stored (waiting for the send
// window) until transmitted, pending until removed from the store. It is
// kept until its terminal event, which comes after the removal and
// reads its first transmission's time; a removal without one (a
// Handover) leaves it, bounded by maxTracked.
type outState struct {
	sent        time.Time // its first transmission
	transmitted bool
	removed     bool
}

// newKitMetrics registers every series; channels counts the open
// channels at scrape time.
func newKitMetrics(clk clock.Clock, channels func() int) *kitMetrics {
	m := &kitMetrics{clock: clk, out: map[finalKey]*outState{}}
	r := &m.reg
	m.events = r.Counter("imv2_events_total", "Observer events of every Channel, by kind.", "kind")
	m.sent = r.Counter("imv2_messages_sent_total", "Outbound messages transmitted for the first time.").With()
	m.resends = r.Counter("imv2_resends_total", "Transmissions of outbound messages after the first.").With()
	r.GaugeFunc("imv2_pending_messages", "Outbound messages accepted and not yet acked or failed: transmitted, or waiting for the send window.", func() float64 {
		n, _ := m.pending()
		return float64(n)
	})
	r.GaugeFunc("imv2_waiting_messages", "Outbound messages pending and not yet transmitted: waiting for the send window or for their channel to open (part of imv2_pending_messages).", func() float64 {
		_, w := m.pending()
		return float64(w)
	})
	m.acksReceived = r.Counter("imv2_acks_received_total", "Terminal outcomes of outbound messages, by ack status and code.", "status", "code")
	m.acksSent = r.Counter("imv2_acks_sent_total", "Acks answering inbound messages, by status and code.", "status", "code")
	m.deltasRejected = r.Counter("imv2_deltas_rejected_total", "Deltas rejected with an error packet, by code.", "code")
	m.target = r.Histogram("imv2_target_call_duration_seconds", "Duration of the Target's PostMessage calls, by outcome (ok, error).", targetBuckets, "outcome")
	m.ackLatency = r.Histogram("imv2_ack_latency_seconds", "From an outbound message's first transmission to its terminal ack (accepted or duplicate).", ackLatencyBuckets)
	m.storeErrors = r.Counter("imv2_store_errors_total", "Errors of the Store, by part (pending, completed, registry, bindings) and operation.", "store", "op")
	m.connections = r.Gauge("imv2_open_connections", "Data-plane WebSocket connections being served.").With()
	r.GaugeFunc("imv2_open_channels", "Channels open on a live connection.", func() float64 { return float64(channels()) })
	m.listenerFailures = r.Counter("imv2_listener_failures_total", "Failures of the platform's reader (Listener.Listen) that restarted it.").With()
	r.RegisterBuildInfo("imv2_build_info", "github.com/xagentkit/imv2")
	r.RegisterGo()
	r.RegisterProcess()
	return m
}

// ServeHTTP serves the exposition.
func (m *kitMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.reg.ServeHTTP(w, r) }

// Observe implements imv2.Observer.
func (m *kitMetrics) Observe(e imv2.Event) {
	m.events.With(e.Kind.String()).Inc()
	switch e.Kind {
	case imv2.EventSent:
		if e.Attempt <= 1 {
			m.sent.Inc()
		} else {
			m.resends.Inc()
		}
		m.transmitted(finalKey{e.ChannelID, e.MessageID})
	case imv2.EventAcked:
		m.acksReceived.With(codelabel.Status(e.Status), "").Inc()
		if sent, ok := m.ended(finalKey{e.ChannelID, e.MessageID}); ok {
			m.ackLatency.With().Observe(m.clock.Now().Sub(sent).Seconds())
		}
	case imv2.EventFailed:
		m.acksReceived.With(string(imv2.AckRejected), m.codes.Label(e.Code)).Inc()
		m.ended(finalKey{e.ChannelID, e.MessageID})
	case imv2.EventDelivered:
		m.acksSent.With(string(imv2.AckAccepted), "").Inc()
		m.target.With("ok").Observe(e.Duration.Seconds())
	case imv2.EventTargetFailed:
		m.target.With("error").Observe(e.Duration.Seconds())
	case imv2.EventDuplicate:
		m.acksSent.With(string(imv2.AckDuplicate), "").Inc()
	case imv2.EventRejected:
		if e.Status == imv2.AckRejected { // an ack; without a status, an error packet
			m.acksSent.With(string(imv2.AckRejected), m.codes.Label(e.Code)).Inc()
		}
	case imv2.EventDeltaRejected:
		m.deltasRejected.With(m.codes.Label(e.Code)).Inc()
	}
}

// stored counts an outbound message the pending store took: waiting
// until its first transmission.
func (m *kitMetrics) stored(k finalKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.out[k]; (o == nil || o.removed) && len(m.out) < maxTracked {
		m.out[k] = &outState{}
	}
}

// transmitted marks k sent (an entry adopted from the store after a
// restart is first seen here).
func (m *kitMetrics) transmitted(k finalKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.out[k]
	if o == nil {
		if len(m.out) >= maxTracked {
			return
		}
		o = &outState{}
		m.out[k] = o
	}
	if !o.transmitted {
		o.transmitted, o.sent = true, m.clock.Now()
	}
}

// ended stops counting k and returns when it was first transmitted.
func (m *kitMetrics) ended(k finalKey) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.out[k]
	if o == nil {
		return time.Time{}, false
	}
	delete(m.out, k)
	return o.sent, o.transmitted
}

// removed counts k out of the pending gauges: the store no longer holds
// it. Its terminal event follows.
func (m *kitMetrics) removed(k finalKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.out[k]; o != nil {
		o.removed = true
	}
}

// pending returns the outbound messages pending and, of them, those not
// yet transmitted.
func (m *kitMetrics) pending() (all, waiting int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.out {
		if o.removed {
			continue
		}
		all++
		if !o.transmitted {
			waiting++
		}
	}
	return all, waiting
}

// metricsObserver passes every event to the kit's metrics, then to next
// (the author's Observer, or nil), and Answered on to next.
type metricsObserver struct {
	m    *kitMetrics
	next imv2.Observer
}

// Observe implements imv2.Observer.
func (o metricsObserver) Observe(e imv2.Event) {
	o.m.Observe(e)
	if o.next != nil {
		o.next.Observe(e)
	}
}

// Answered implements answered.Observer for the Observer it wraps.
func (o metricsObserver) Answered(channelID, messageID string) {
	if a, ok := o.next.(answered.Observer); ok {
		a.Answered(channelID, messageID)
	}
}

// openChannels counts the channels open on a live connection.
func (c *Connector) openChannels() int {
	n := 0
	for _, id := range c.server.ChannelIDs() {
		if c.server.IsOpen(id) {
			n++
		}
	}
	return n
}

// countConnection wraps the data plane's /ws handler, which returns when
// its connection ends, in imv2_open_connections.
func (m *kitMetrics) countConnection(ws http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.connections.Inc()
		defer m.connections.Dec()
		ws.ServeHTTP(w, r)
	})
}
