package pgstore_test

import (
	"encoding/binary"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/xagentkit/imv2/pgstore"
)

// pgWatch is a TCP proxy in front of PostgreSQL that reads the protocol
// going through it, to know which group commits (groupcommit.go) a
// client has sent and not yet had answered. Every Sync ends a batch (one
// implicit transaction, answered by one ReadyForQuery); a batch is a group
// when it takes its messages' locks with the group's statement, and the
// watch decodes the group's size from that statement's key array and the
// messages its Records write from the record statement's arrays (or from
// a Record alone's statement, recordOne's). committed reports the Records
// whose batch the server answered without an error.
//
// arm makes the watch freeze at the next group of at least two calls
// with Records that a client sends: from then on it forwards nothing more
// to any client (requests still go to the server), and it reports the
// batches every connection has in flight, whose answers the clients will
// not see until thaw. A client killed then dies with those transactions
// sent and unanswered: mid-commit, as it sees them.
type pgWatch struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	cond   *sync.Cond
	conns  map[*watchConn]bool
	frozen bool
	armed  chan []watchBatch // non-nil: freeze at the next group with Records
	// recorded holds the channel and message of every Record whose batch
	// the server answered without an error, before the answer goes on.
	recorded map[[2]string]bool
	// begun holds the channel and message of every Begin (beginSQL) sent
	// to the server, answered or not: a post that may have started.
	begun map[[2]string]bool
	done  bool
	wg    sync.WaitGroup
}

// watchBatch is what one batch (up to its Sync) holds.
type watchBatch struct {
	calls   int         // the group's messages (its lock array); 0: not a group
	claims  int         // the Claims of the group
	records [][2]string // the channel and message of each Record, of a group or alone
	failed  bool        // the server answered an error
}

type watchConn struct {
	client, server net.Conn
	closed         bool
	stmts          map[string]string // prepared statement → its SQL
	cur            watchBatch        // what the Binds since the last Sync hold
	inflight       []watchBatch      // sent, ReadyForQuery not yet forwarded
}

// newPGWatch listens on loopback in front of the server of dbURL and
// returns the watch and the URL that goes through it.
func newPGWatch(t *testing.T, dbURL string) (*pgWatch, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &pgWatch{ln: ln, upstream: u.Host, conns: map[*watchConn]bool{}, recorded: map[[2]string]bool{},
		begun: map[[2]string]bool{}}
	w.cond = sync.NewCond(&w.mu)
	w.wg.Add(1)
	go w.accept()
	t.Cleanup(w.close)
	u.Host = ln.Addr().String()
	return w, u.String()
}

// arm returns a channel that receives the batches in flight on every
// connection when the watch froze (see pgWatch).
func (w *pgWatch) arm() <-chan []watchBatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = make(chan []watchBatch, 1)
	return w.armed
}

// committed reports whether a Record of the message went through the
// watch, and the server answered its batch (one transaction) without an
// error: the record is committed.
func (w *pgWatch) committed(channel, message string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recorded[[2]string{channel, message}]
}

// beginSent reports whether a Begin of the message went through the
// watch to the server: its claim's post may have begun.
func (w *pgWatch) beginSent(channel, message string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.begun[[2]string{channel, message}]
}

// thaw forwards the answers again, and disarms.
func (w *pgWatch) thaw() {
	w.mu.Lock()
	w.frozen, w.armed = false, nil
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *pgWatch) close() {
	w.mu.Lock()
	w.done = true
	for c := range w.conns {
		_ = c.client.Close()
		_ = c.server.Close()
	}
	w.mu.Unlock()
	w.cond.Broadcast()
	_ = w.ln.Close()
	w.wg.Wait()
}

func (w *pgWatch) accept() {
	defer w.wg.Done()
	for {
		client, err := w.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", w.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &watchConn{client: client, server: server, stmts: map[string]string{}}
		w.mu.Lock()
		if w.done {
			w.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		w.conns[c] = true
		w.wg.Add(2)
		w.mu.Unlock()
		go w.requests(c)
		go w.answers(c)
	}
}

// end closes both sides of c once either ends.
func (w *pgWatch) end(c *watchConn) {
	w.mu.Lock()
	c.closed = true
	delete(w.conns, c)
	w.mu.Unlock()
	w.cond.Broadcast()
	_ = c.client.Close()
	_ = c.server.Close()
}

// requests forwards what the client sends, noting each batch before it
// goes: its answer cannot come back before it is noted.
func (w *pgWatch) requests(c *watchConn) {
	defer w.wg.Done()
	defer w.end(c)
	var f framer
	first := true
	b := make([]byte, 64<<10)
	for {
		n, err := c.client.Read(b)
		if n > 0 {
			f.buf = append(f.buf, b[:n]...)
			w.mu.Lock()
			for {
				typ, body, ok := f.next(first)
				if !ok {
					break
				}
				first = false
				w.request(c, typ, body)
			}
			w.mu.Unlock()
			if _, err := c.server.Write(b[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// answers forwards what the server sends, unless the watch is frozen.
func (w *pgWatch) answers(c *watchConn) {
	defer w.wg.Done()
	defer w.end(c)
	var f framer
	b := make([]byte, 64<<10)
	for {
		n, err := c.server.Read(b)
		if n > 0 {
			w.mu.Lock()
			for w.frozen && !c.closed && !w.done {
				w.cond.Wait()
			}
			f.buf = append(f.buf, b[:n]...)
			for {
				typ, _, ok := f.next(false)
				if !ok {
					break
				}
				if len(c.inflight) == 0 {
					continue // the startup's
				}
				switch typ {
				case 'E': // ErrorResponse: the batch's transaction is rolled back
					c.inflight[0].failed = true
				case 'Z': // ReadyForQuery: the batch is answered
					if b := c.inflight[0]; !b.failed {
						for _, r := range b.records {
							w.recorded[r] = true
						}
					}
					c.inflight = c.inflight[1:]
				}
			}
			gone := c.closed || w.done
			w.mu.Unlock()
			if gone {
				return
			}
			if _, err := c.client.Write(b[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Statements of the group commit, as the watch recognises them: a
// group's lock, and a Record alone's statement (recordOne).
const (
	lockGroupSQL = "SELECT pg_advisory_xact_lock(k) FROM unnest("
	recordOneSQL = "VALUES ($1, $2, $3, $4, nextval('imv2_completed_seq'))"
)

// request notes one client message. w.mu is held.
func (w *pgWatch) request(c *watchConn, typ byte, body []byte) {
	switch typ {
	case 'P': // Parse: name, query, …
		name, rest, _ := cstring(body)
		query, _, _ := cstring(rest)
		c.stmts[name] = query
	case 'B': // Bind: portal, statement, formats, parameters
		_, rest, _ := cstring(body)
		stmt, rest, _ := cstring(rest)
		query := c.stmts[stmt]
		isLock := strings.HasPrefix(query, lockGroupSQL)
		isClaims, isRecords := query == pgstore.ClaimGroupSQL, query == pgstore.RecordGroupSQL
		isRecord := strings.Contains(query, recordOneSQL)
		if query == pgstore.BeginSQL {
			// The IDs are bytea, sent in binary; the owner is text.
			if params, _ := bindParams(rest); len(params) >= 2 {
				w.begun[[2]string{string(params[0]), string(params[1])}] = true
			}
			return
		}
		if !isLock && !isClaims && !isRecords && !isRecord {
			return
		}
		params, binary := bindParams(rest)
		if len(params) < 2 && !isLock || len(params) < 1 || !binary {
			return
		}
		switch {
		case isLock:
			c.cur.calls = arrayLen(params[0])
		case isClaims:
			c.cur.claims = arrayLen(params[0])
		case isRecord:
			c.cur.records = append(c.cur.records, [2]string{string(params[0]), string(params[1])})
		case isRecords:
			chs, ids := byteaArray(params[0]), byteaArray(params[1])
			for i := range min(len(chs), len(ids)) {
				c.cur.records = append(c.cur.records, [2]string{string(chs[i]), string(ids[i])})
			}
		}
	case 'S', 'Q': // Sync, or a simple query: one ReadyForQuery each
		b := c.cur
		c.cur = watchBatch{}
		c.inflight = append(c.inflight, b)
		if w.armed != nil && !w.frozen && b.calls >= 2 && len(b.records) > 0 {
			w.frozen = true
			var all []watchBatch
			for o := range w.conns {
				for _, f := range o.inflight {
					if f.calls > 0 {
						all = append(all, f)
					}
				}
			}
			w.armed <- all
			w.armed = nil
		}
	}
}

// framer splits a protocol stream into messages: a type byte and a
// length that counts itself, except the client's first message (startup),
// which has no type.
type framer struct{ buf []byte }

func (f *framer) next(untyped bool) (typ byte, body []byte, ok bool) {
	h := 5
	if untyped {
		h = 4
	}
	if len(f.buf) < h {
		return 0, nil, false
	}
	n := int(binary.BigEndian.Uint32(f.buf[h-4:]))
	if n < 4 || len(f.buf) < h-4+n {
		return 0, nil, false
	}
	if !untyped {
		typ = f.buf[0]
	}
	body = f.buf[h : h-4+n]
	f.buf = f.buf[h-4+n:]
	return typ, body, true
}

// cstring splits a NUL-terminated string off b.
func cstring(b []byte) (string, []byte, bool) {
	for i, x := range b {
		if x == 0 {
			return string(b[:i]), b[i+1:], true
		}
	}
	return "", nil, false
}

// bindParams reads a Bind's parameters (after its portal and statement)
// and whether all are in binary format.
func bindParams(b []byte) ([][]byte, bool) {
	u16 := func() (int, bool) {
		if len(b) < 2 {
			return 0, false
		}
		v := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		return v, true
	}
	nf, ok := u16()
	if !ok {
		return nil, false
	}
	bin := nf > 0
	for range nf {
		f, ok := u16()
		if !ok {
			return nil, false
		}
		bin = bin && f == 1
	}
	np, ok := u16()
	if !ok {
		return nil, false
	}
	params := make([][]byte, 0, np)
	for range np {
		if len(b) < 4 {
			return nil, false
		}
		n := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		if n < 0 {
			params = append(params, nil)
			continue
		}
		if len(b) < n {
			return nil, false
		}
		params = append(params, b[:n])
		b = b[n:]
	}
	return params, bin
}

// arrayLen is the length of a one-dimensional array in binary format:
// dimensions, flags and element type, then each dimension's length and
// lower bound.
func arrayLen(b []byte) int {
	if len(b) < 20 || binary.BigEndian.Uint32(b) != 1 {
		return 0
	}
	return int(binary.BigEndian.Uint32(b[12:]))
}

// byteaArray decodes a one-dimensional bytea array in binary format.
func byteaArray(b []byte) [][]byte {
	n := arrayLen(b)
	if n == 0 {
		return nil
	}
	b = b[20:]
	out := make([][]byte, 0, n)
	for range n {
		if len(b) < 4 {
			return nil
		}
		k := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		if k < 0 || len(b) < k {
			return nil
		}
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}
