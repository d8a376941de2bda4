package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/codelabel"
)

// MaxExtraCodes bounds the distinct codes outside the SDK's own that get a
// label value of their own; later ones count as "other".
const MaxExtraCodes = codelabel.MaxExtra

// TargetBuckets are the upper bounds, in seconds, of the Target call
// histogram: from a local call to a slow platform API.
var TargetBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Collector turns Observer events into Prometheus metrics. It implements
// imv2.Observer and prometheus.Collector, and is safe for concurrent use.
type Collector struct {
	events        *prometheus.CounterVec
	sent          prometheus.Counter
	resends       prometheus.Counter
	pending       prometheus.Gauge
	acksReceived  *prometheus.CounterVec
	acksSent      *prometheus.CounterVec
	deltaRejected *prometheus.CounterVec
	target        *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec

	registry *prometheus.Registry
	codes    codelabel.Codes
}

// New returns a Collector registered in a registry of its own, which
// Handler serves.
func New() *Collector {
	c := &Collector{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imv2_events_total", Help: "Observer events of every Channel, by kind.",
		}, []string{"kind"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imv2_messages_sent_total", Help: "Outbound messages transmitted for the first time.",
		}),
		resends: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imv2_resends_total", Help: "Transmissions of outbound messages after the first.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imv2_pending_messages", Help: "Outbound messages transmitted and not yet acked or failed.",
		}),
		acksReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imv2_acks_received_total", Help: "Terminal outcomes of outbound messages, by ack status and code.",
		}, []string{"status", "code"}),
		acksSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imv2_acks_sent_total", Help: "Acks answering inbound messages, by status and code.",
		}, []string{"status", "code"}),
		deltaRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imv2_deltas_rejected_total", Help: "Deltas rejected with an error packet, by code.",
		}, []string{"code"}),
		target: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "imv2_target_call_duration_seconds", Help: "Duration of the Target's PostMessage calls, by outcome (ok, error).",
			Buckets: TargetBuckets,
		}, []string{"outcome"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imv2_store_errors_total", Help: "Errors of the pending and completed stores, by store and operation.",
		}, []string{"store", "op"}),
		registry: prometheus.NewRegistry(),
	}
	c.registry.MustRegister(c)
	return c
}

// Handler serves the Collector's metrics in the Prometheus exposition
// formats.
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.registry, promhttp.HandlerOpts{})
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

func (c *Collector) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.events, c.sent, c.resends, c.pending, c.acksReceived,
		c.acksSent, c.deltaRejected, c.target, c.storeErrors}
}

// Observe implements imv2.Observer.
func (c *Collector) Observe(e imv2.Event) {
	c.events.WithLabelValues(e.Kind.String()).Inc()
	switch e.Kind {
	case imv2.EventSent:
		if e.Attempt <= 1 {
			c.sent.Inc()
			c.pending.Inc()
		} else {
			c.resends.Inc()
		}
	case imv2.EventAcked:
		c.acksReceived.WithLabelValues(codelabel.Status(e.Status), "").Inc()
		c.ended(e)
	case imv2.EventFailed:
		c.acksReceived.WithLabelValues(string(imv2.AckRejected), c.codes.Label(e.Code)).Inc()
		c.ended(e)
	case imv2.EventDelivered:
		c.acksSent.WithLabelValues(string(imv2.AckAccepted), "").Inc()
		c.target.WithLabelValues("ok").Observe(e.Duration.Seconds())
	case imv2.EventTargetFailed:
		c.target.WithLabelValues("error").Observe(e.Duration.Seconds())
	case imv2.EventDuplicate:
		c.acksSent.WithLabelValues(string(imv2.AckDuplicate), "").Inc()
	case imv2.EventRejected:
		if e.Status == imv2.AckRejected { // an ack; without a status, an error packet
			c.acksSent.WithLabelValues(string(imv2.AckRejected), c.codes.Label(e.Code)).Inc()
		}
	case imv2.EventDeltaRejected:
		c.deltaRejected.WithLabelValues(c.codes.Label(e.Code)).Inc()
	}
}

// ended moves the pending gauge for a message that left the queue, if it
// was transmitted (Attempt ≥ 1) and so counted.
func (c *Collector) ended(e imv2.Event) {
	if e.Attempt >= 1 {
		c.pending.Dec()
	}
}
