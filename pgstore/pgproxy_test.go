package pgstore_test

import (
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// pgProxy forwards TCP connections to PostgreSQL with faults a network
// has: a delay each way, and a blackhole that forwards nothing (bytes
// are held, as TCP retransmits them, and flow on when it ends). Each
// chunk is delayed from when it arrived, so latency does not limit
// throughput.
type pgProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	cond  *sync.Cond
	delay time.Duration
	black bool
	conns []net.Conn
	done  bool
	wg    sync.WaitGroup
}

// newPGProxy listens on loopback in front of the server of dbURL and
// returns the proxy and the URL that goes through it.
func newPGProxy(t *testing.T, dbURL string) (*pgProxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, upstream: u.Host}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

// set changes the faults for every byte from now on.
func (p *pgProxy) set(delay time.Duration, black bool) {
	p.mu.Lock()
	p.delay, p.black = delay, black
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *pgProxy) close() {
	p.mu.Lock()
	p.done = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *pgProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.wg.Add(4)
		p.mu.Unlock()
		p.pipe(c, up)
		p.pipe(up, c)
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies from one side to the other: a reader stamps each chunk, a
// writer sends it once its delay passed and no blackhole holds it.
func (p *pgProxy) pipe(from, to net.Conn) {
	q := make(chan chunk, 1024)
	go func() {
		defer p.wg.Done()
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := from.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer p.wg.Done()
		defer func() {
			_ = to.Close()
			_ = from.Close()
			for range q { // let the reader end
			}
		}()
		for c := range q {
			p.mu.Lock()
			for p.black && !p.done {
				p.cond.Wait()
			}
			d, done := p.delay, p.done
			p.mu.Unlock()
			if done {
				return
			}
			time.Sleep(time.Until(c.at.Add(d))) // the injected latency
			if _, err := to.Write(c.b); err != nil {
				return
			}
		}
	}()
}
