package connector

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
)

// Defaults of ServerLimits.
const (
	// DefaultMaxConns caps the connections one server serves at once.
	DefaultMaxConns = 1024
	// DefaultMaxUnauthConns caps the connections among them that have not
	// yet passed an API key check or presented a valid download URL.
	DefaultMaxUnauthConns = 128
)

// ServerLimits caps the connections of a server from NewServerLimits; zero
// fields take the defaults.
//
// A connection is unauthenticated until one of its requests passes the API
// key check (or, with no key configured, reaches a keyed endpoint) or
// presents a valid signed download URL. When a new connection would go over
// either cap, the oldest unauthenticated connection that is not serving a
// request (still sending its headers, or idle between requests) is closed
// to make room; when there is none, the new connection is closed at once.
// An authenticated connection is never closed for a newcomer, so a peer
// flooding the server without the key holds at most MaxUnauthConns
// connections and cannot lock xAgent out, and a real client, which sends
// its request as soon as it connects, would need MaxUnauthConns newer
// connections to arrive while it sends its headers to lose its own.
//
// Connections are counted while net/http serves them: a /ws connection
// leaves the count when the data plane takes it over (hijacks it), and the
// data plane bounds its own connections.
type ServerLimits struct {
	MaxConns       int // default DefaultMaxConns
	MaxUnauthConns int // default DefaultMaxUnauthConns; at most MaxConns
}

// connLimiter enforces ServerLimits through http.Server's ConnContext and
// ConnState hooks. It accepts every connection and then decides, rather
// than blocking Accept at the cap (as golang.org/x/net/netutil's
// LimitListener does): a newcomer blocked in the kernel's backlog could
// not make an idle unauthenticated connection yield its slot, so a flood
// without the key would lock xAgent out; and the hooks work whether the
// caller runs ListenAndServe or Serve on its own listener. A refused
// connection costs one accept and one close; its descriptor is freed at
// once.
type connLimiter struct {
	maxConns, maxUnauth int

	mu     sync.Mutex
	conns  map[net.Conn]*trackedConn
	unauth list.List // *trackedConn not yet authenticated, oldest first
}

type trackedConn struct {
	conn net.Conn
	elem *list.Element // in connLimiter.unauth while unauthenticated; nil after
	busy bool          // serving a request (http.StateActive)
	l    *connLimiter
}

type connKey struct{}

func newConnLimiter(lim ServerLimits) *connLimiter {
	if lim.MaxConns <= 0 {
		lim.MaxConns = DefaultMaxConns
	}
	if lim.MaxUnauthConns <= 0 {
		lim.MaxUnauthConns = DefaultMaxUnauthConns
	}
	lim.MaxUnauthConns = min(lim.MaxUnauthConns, lim.MaxConns)
	return &connLimiter{maxConns: lim.MaxConns, maxUnauth: lim.MaxUnauthConns, conns: make(map[net.Conn]*trackedConn)}
}

// connContext registers c (http.Server.ConnContext runs just before
// StateNew) and hands its record to the Handler through the context.
func (l *connLimiter) connContext(ctx context.Context, c net.Conn) context.Context {
	tc := &trackedConn{conn: c, l: l}
	l.mu.Lock()
	l.conns[c] = tc
	tc.elem = l.unauth.PushBack(tc)
	l.mu.Unlock()
	return context.WithValue(ctx, connKey{}, tc)
}

// connState is http.Server.ConnState.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	var drop []net.Conn
	l.mu.Lock()
	tc := l.conns[c]
	switch {
	case tc == nil: // closed by the limiter already
	case st == http.StateNew:
		drop = l.admitLocked()
	case st == http.StateActive:
		tc.busy = true
	case st == http.StateIdle:
		tc.busy = false
	case st == http.StateHijacked, st == http.StateClosed:
		l.removeLocked(tc)
	}
	l.mu.Unlock()
	for _, c := range drop {
		_ = c.Close() // its serve goroutine sees the error and ends
	}
}

// admitLocked runs after a new connection was counted: while a cap is
// exceeded it drops the oldest unauthenticated connection not serving a
// request, the newcomer itself when no other can go.
func (l *connLimiter) admitLocked() []net.Conn {
	var drop []net.Conn
	for len(l.conns) > l.maxConns || l.unauth.Len() > l.maxUnauth {
		var victim *trackedConn
		for e := l.unauth.Front(); e != nil; e = e.Next() {
			if tc := e.Value.(*trackedConn); !tc.busy {
				victim = tc
				break
			}
		}
		if victim == nil { // the newcomer is always a candidate; this is a caller's own ConnContext
			break
		}
		l.removeLocked(victim)
		drop = append(drop, victim.conn)
	}
	return drop
}

func (l *connLimiter) removeLocked(tc *trackedConn) {
	if tc.elem != nil {
		l.unauth.Remove(tc.elem)
		tc.elem = nil
	}
	delete(l.conns, tc.conn)
}

// markAuthenticated records that the connection serving ctx's request
// passed a credential check; without a limiter (a Handler not served by
// NewServer) it does nothing.
func markAuthenticated(ctx context.Context) {
	tc, _ := ctx.Value(connKey{}).(*trackedConn)
	if tc == nil {
		return
	}
	tc.l.mu.Lock()
	if tc.elem != nil {
		tc.l.unauth.Remove(tc.elem)
		tc.elem = nil
	}
	tc.l.mu.Unlock()
}
