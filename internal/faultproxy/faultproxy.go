// Package faultproxy is a WebSocket proxy for tests that misbehaves on
// purpose: it drops, duplicates, delays and reorders frames, cuts
// connections at random and can hold them half-open. Faults are drawn from
// a seeded source, so a failing soak run can be replayed with its seed.
//
// It is test equipment: it binds only where the test's httptest.Server
// binds (loopback) and forwards only to the upstream URL it was given.
package faultproxy

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Faults are per-frame probabilities in [0, 1] and their bounds.
type Faults struct {
	Drop      float64
	Duplicate float64
	// Delay holds a frame for up to MaxDelay; later frames overtake it,
	// which is how reordering happens.
	Delay    float64
	MaxDelay time.Duration
	// Cut closes the whole connection (both legs) after a frame.
	Cut float64
	// Seed makes a run reproducible.
	Seed uint64
}

// Stats counts what the proxy did.
type Stats struct {
	Conns, Frames, Dropped, Duplicated, Delayed, Cuts int
}

// Proxy is an http.Handler that accepts WebSocket connections and relays
// each to Upstream through the faults.
type Proxy struct {
	upstream string

	mu       sync.Mutex
	faults   Faults
	rnd      *rand.Rand
	stats    Stats
	halfOpen bool
	conns    map[*relay]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// New returns a proxy relaying to the ws:// URL upstream.
func New(upstream string, f Faults) *Proxy {
	return &Proxy{
		upstream: upstream,
		faults:   f,
		rnd:      rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15)),
		conns:    map[*relay]struct{}{},
	}
}

// SetFaults replaces the fault rates (for a calm phase at the end of a soak).
func (p *Proxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f.Seed = p.faults.Seed
	p.faults = f
}

// HalfOpen stops (true) or resumes (false) forwarding in both directions
// while keeping every connection open: the peers see silence, not a close.
func (p *Proxy) HalfOpen(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.halfOpen = on
}

// CutAll closes every relayed connection now.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	rs := make([]*relay, 0, len(p.conns))
	for r := range p.conns {
		rs = append(rs, r)
	}
	p.mu.Unlock()
	for _, r := range rs {
		r.close()
	}
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close cuts every connection and waits for the relay goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.CutAll()
	p.wg.Wait()
}

var upgrader = websocket.Upgrader{
	CheckOrigin: func(*http.Request) bool { return true },
}

// ServeHTTP accepts a client, dials the upstream with the same subprotocols
// and Authorization header, and relays frames both ways.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := http.Header{}
	if a := r.Header.Get("Authorization"); a != "" {
		hdr.Set("Authorization", a)
	}
	d := websocket.Dialer{Subprotocols: websocket.Subprotocols(r), HandshakeTimeout: 5 * time.Second}
	up, resp, err := d.DialContext(r.Context(), p.upstream, hdr)
	if err != nil {
		code := http.StatusBadGateway
		if resp != nil {
			code = resp.StatusCode
		}
		http.Error(w, "upstream: "+strings.TrimSpace(err.Error()), code)
		return
	}
	upg := upgrader
	if sp := up.Subprotocol(); sp != "" {
		upg.Subprotocols = []string{sp}
	}
	down, err := upg.Upgrade(w, r, nil)
	if err != nil {
		up.Close()
		return
	}
	rl := &relay{p: p, a: down, b: up}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		rl.close()
		return
	}
	p.conns[rl] = struct{}{}
	p.stats.Conns++
	p.wg.Add(2)
	p.mu.Unlock()
	go rl.pump(down, up)
	go rl.pump(up, down)
}

// relay is one client connection and its upstream leg.
type relay struct {
	p    *Proxy
	a, b *websocket.Conn
	once sync.Once
	wmu  sync.Mutex // one writer per leg at a time (delayed frames write late)
}

func (r *relay) close() {
	r.once.Do(func() {
		r.a.Close()
		r.b.Close()
		r.p.mu.Lock()
		delete(r.p.conns, r)
		r.p.mu.Unlock()
	})
}

// decision is what happens to one frame.
type decision struct {
	drop, dup, cut, silent bool
	delay                  time.Duration
}

func (p *Proxy) decide() decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Frames++
	if p.halfOpen {
		return decision{silent: true}
	}
	f := p.faults
	var d decision
	switch {
	case p.rnd.Float64() < f.Drop:
		d.drop = true
		p.stats.Dropped++
	case p.rnd.Float64() < f.Delay && f.MaxDelay > 0:
		d.delay = time.Duration(p.rnd.Int64N(int64(f.MaxDelay)))
		p.stats.Delayed++
	}
	if !d.drop && p.rnd.Float64() < f.Duplicate {
		d.dup = true
		p.stats.Duplicated++
	}
	if p.rnd.Float64() < f.Cut {
		d.cut = true
		p.stats.Cuts++
	}
	return d
}

func (r *relay) pump(from, to *websocket.Conn) {
	defer r.p.wg.Done()
	defer r.close()
	for {
		typ, data, err := from.ReadMessage()
		if err != nil {
			return
		}
		d := r.p.decide()
		switch {
		case d.silent || d.drop:
		case d.delay > 0:
			r.p.wg.Add(1)
			time.AfterFunc(d.delay, func() {
				defer r.p.wg.Done()
				r.write(to, typ, data, d.dup)
			})
		default:
			r.write(to, typ, data, d.dup)
		}
		if d.cut {
			return
		}
	}
}

func (r *relay) write(to *websocket.Conn, typ int, data []byte, dup bool) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_ = to.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if to.WriteMessage(typ, data) == nil && dup {
		_ = to.WriteMessage(typ, data)
	}
}
