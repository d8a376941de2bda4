// Package promtext writes metrics in the Prometheus text exposition
// format (version 0.0.4) without the Prometheus client, so the kit can
// serve /metrics by default while the root module imports no metrics
// library. It holds what the kit needs and no more: counters, gauges and
// histograms with fixed label names, values computed at scrape time, and
// the Go runtime, process and build series (runtime.go, process_*.go).
// Label values are the caller's to bound.
package promtext

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is the exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families and writes them in registration order.
// It is safe for concurrent use.
type Registry struct {
	mu   sync.Mutex
	fams []func(*Writer)
}

// add registers a family's writer.
func (r *Registry) add(f func(*Writer)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fams = append(r.fams, f)
}

// Counter registers a counter family with the given label names.
func (r *Registry) Counter(name, help string, labels ...string) *Vec {
	v := &Vec{name: name, help: help, typ: "counter", labels: labels, series: map[string]*Value{}}
	r.add(v.write)
	return v
}

// Gauge registers a gauge family with the given label names.
func (r *Registry) Gauge(name, help string, labels ...string) *Vec {
	v := &Vec{name: name, help: help, typ: "gauge", labels: labels, series: map[string]*Value{}}
	r.add(v.write)
	return v
}

// GaugeFunc registers a gauge without labels whose value f gives at
// each scrape.
func (r *Registry) GaugeFunc(name, help string, f func() float64) {
	r.add(func(w *Writer) {
		w.Family(name, help, "gauge")
		w.Sample(name, nil, f())
	})
}

// Histogram registers a histogram family with the given upper bounds
// (sorted, +Inf implied) and label names.
func (r *Registry) Histogram(name, help string, bounds []float64, labels ...string) *HistogramVec {
	h := &HistogramVec{name: name, help: help, bounds: slices.Clone(bounds), labels: labels, series: map[string]*Histogram{}}
	r.add(h.write)
	return h
}

// Func registers f, which writes whole families at each scrape (through
// Writer.Family and Writer.Sample).
func (r *Registry) Func(f func(*Writer)) { r.add(f) }

// Write returns every family in the text format.
func (r *Registry) Write() []byte {
	r.mu.Lock()
	fams := slices.Clone(r.fams)
	r.mu.Unlock()
	w := &Writer{}
	for _, f := range fams {
		f(w)
	}
	return w.buf.Bytes()
}

// ServeHTTP answers GET and HEAD with every family.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body := r.Write()
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if req.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// Writer builds the exposition of one scrape.
type Writer struct{ buf bytes.Buffer }

// Family starts a family: its HELP and TYPE lines. Every sample of it
// follows before the next Family.
func (w *Writer) Family(name, help, typ string) {
	w.buf.WriteString("# HELP ")
	w.buf.WriteString(name)
	w.buf.WriteByte(' ')
	w.buf.WriteString(helpEscaper.Replace(help))
	w.buf.WriteString("\n# TYPE ")
	w.buf.WriteString(name)
	w.buf.WriteByte(' ')
	w.buf.WriteString(typ)
	w.buf.WriteByte('\n')
}

// Sample writes one line: name, labels as name-value pairs, value.
func (w *Writer) Sample(name string, labels []string, v float64) {
	w.buf.WriteString(name)
	if len(labels) > 0 {
		w.buf.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			w.buf.WriteString(labels[i])
			w.buf.WriteString(`="`)
			w.buf.WriteString(valueEscaper.Replace(labels[i+1]))
			w.buf.WriteByte('"')
		}
		w.buf.WriteByte('}')
	}
	w.buf.WriteByte(' ')
	w.buf.WriteString(formatFloat(v))
	w.buf.WriteByte('\n')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Value is one series of a counter or gauge: a float64 updated
// atomically.
type Value struct{ bits atomic.Uint64 }

// Add adds d (a counter's d is never negative).
func (v *Value) Add(d float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Inc adds 1.
func (v *Value) Inc() { v.Add(1) }

// Dec subtracts 1 (gauges).
func (v *Value) Dec() { v.Add(-1) }

// Get returns the value.
func (v *Value) Get() float64 { return math.Float64frombits(v.bits.Load()) }

// Vec is a counter or gauge family: one Value per combination of label
// values.
type Vec struct {
	name, help, typ string
	labels          []string

	mu     sync.Mutex
	series map[string]*Value // by label values joined with sep
	keys   [][]string        // label values, in creation order
}

// sep joins label values in a series key; it cannot occur in UTF-8 text.
const sep = "\xff"

// With returns the series of these label values (one per label name),
// creating it at 0.
func (v *Vec) With(values ...string) *Value {
	var buf [128]byte
	k := appendKey(buf[:0], values)
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.series[string(k)] // no allocation for a series that exists (the hot path)
	if s == nil {
		s = &Value{}
		v.series[string(k)] = s
		v.keys = append(v.keys, slices.Clone(values))
	}
	return s
}

// appendKey appends the series key of values: joined with sep.
func appendKey(b []byte, values []string) []byte {
	for i, x := range values {
		if i > 0 {
			b = append(b, sep...)
		}
		b = append(b, x...)
	}
	return b
}

func (v *Vec) write(w *Writer) {
	v.mu.Lock()
	keys := slices.Clone(v.keys)
	v.mu.Unlock()
	w.Family(v.name, v.help, v.typ)
	if len(v.labels) == 0 && len(keys) == 0 {
		w.Sample(v.name, nil, 0) // an unlabelled family always has its series
		return
	}
	slices.SortFunc(keys, slices.Compare)
	for _, vals := range keys {
		w.Sample(v.name, pairs(v.labels, vals), v.With(vals...).Get())
	}
}

// pairs interleaves label names and values.
func pairs(names, values []string) []string {
	p := make([]string, 0, 2*len(names))
	for i, n := range names {
		p = append(p, n, values[i])
	}
	return p
}

// HistogramVec is a histogram family: one Histogram per combination of
// label values.
type HistogramVec struct {
	name, help string
	bounds     []float64
	labels     []string

	mu     sync.Mutex
	series map[string]*Histogram
	keys   [][]string
}

// With returns the histogram of these label values, creating it empty.
func (h *HistogramVec) With(values ...string) *Histogram {
	var buf [128]byte
	k := appendKey(buf[:0], values)
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[string(k)]
	if s == nil {
		s = &Histogram{bounds: h.bounds, counts: make([]atomic.Uint64, len(h.bounds)+1)}
		h.series[string(k)] = s
		h.keys = append(h.keys, slices.Clone(values))
	}
	return s
}

func (h *HistogramVec) write(w *Writer) {
	h.mu.Lock()
	keys := slices.Clone(h.keys)
	h.mu.Unlock()
	w.Family(h.name, h.help, "histogram")
	if len(h.labels) == 0 && len(keys) == 0 {
		keys = [][]string{{}}
	}
	slices.SortFunc(keys, slices.Compare)
	for _, vals := range keys {
		s := h.With(vals...)
		base := pairs(h.labels, vals)
		var cum uint64
		for i := range s.counts {
			cum += s.counts[i].Load()
			le := "+Inf"
			if i < len(s.bounds) {
				le = formatFloat(s.bounds[i])
			}
			w.Sample(h.name+"_bucket", append(slices.Clone(base), "le", le), float64(cum))
		}
		// The count is the +Inf bucket's, read once, so the two agree.
		w.Sample(h.name+"_sum", base, math.Float64frombits(s.sum.Load()))
		w.Sample(h.name+"_count", base, float64(cum))
	}
}

// Histogram counts observations in fixed buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // the first bound ≥ v: le is inclusive
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}
