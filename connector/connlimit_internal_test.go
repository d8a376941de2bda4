package connector

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeConn records whether the limiter closed it.
type fakeConn struct {
	net.Conn
	closed bool
}

func (f *fakeConn) Close() error { f.closed = true; return nil }

// arrive runs a new connection through the hooks as http.Server does.
func arrive(l *connLimiter) (*fakeConn, context.Context) {
	c := &fakeConn{}
	ctx := l.connContext(context.Background(), c)
	l.connState(c, http.StateNew)
	return c, ctx
}

// TestConnLimiter_Policy: over the unauthenticated cap the oldest
// unauthenticated connection not mid-request goes; a busy or authenticated
// one never does; with none to spare the newcomer goes; a hijacked or
// closed connection frees its slot.
func TestConnLimiter_Policy(t *testing.T) {
	l := newConnLimiter(ServerLimits{MaxConns: 4, MaxUnauthConns: 2})
	a, _ := arrive(l)
	b, bctx := arrive(l)
	c, _ := arrive(l) // over 2 unauthenticated: a, the oldest, goes
	assert.True(t, a.closed)
	assert.False(t, b.closed || c.closed)

	l.connState(b, http.StateActive) // b is mid-request
	d, _ := arrive(l)                // c goes, not the busy b
	assert.True(t, c.closed)
	assert.False(t, b.closed || d.closed)

	l.connState(d, http.StateActive)
	e, _ := arrive(l) // b and d both busy: the newcomer goes
	assert.True(t, e.closed)
	assert.False(t, b.closed || d.closed)

	markAuthenticated(bctx) // b passed the key check
	l.connState(b, http.StateIdle)
	l.connState(d, http.StateIdle)
	f, _ := arrive(l) // unauthenticated: d, f
	g, _ := arrive(l) // d (oldest idle unauthenticated) goes, never b
	assert.True(t, d.closed)
	assert.False(t, b.closed || f.closed || g.closed)

	// Total cap: 4 with b, f, g and h authenticated; the next newcomer goes.
	for _, ctx := range []context.Context{l.ctxOf(t, f), l.ctxOf(t, g)} {
		markAuthenticated(ctx)
	}
	h, hctx := arrive(l)
	markAuthenticated(hctx)
	i, _ := arrive(l)
	assert.True(t, i.closed, "every slot held by an authenticated connection")
	assert.False(t, b.closed || f.closed || g.closed || h.closed)

	l.connState(h, http.StateHijacked) // the data plane took it: slot free
	l.connState(g, http.StateClosed)
	j, _ := arrive(l)
	k, _ := arrive(l)
	assert.False(t, j.closed || k.closed)
	assert.Len(t, l.conns, 4)
	assert.Equal(t, 2, l.unauth.Len())

	// A conn the limiter closed reports StateClosed later: no double count.
	l.connState(a, http.StateClosed)
	assert.Len(t, l.conns, 4)
	markAuthenticated(context.Background()) // no limiter: nothing happens
}

// ctxOf returns the context connContext gave c, for markAuthenticated.
func (l *connLimiter) ctxOf(t *testing.T, c net.Conn) context.Context {
	t.Helper()
	l.mu.Lock()
	tc := l.conns[c]
	l.mu.Unlock()
	require.NotNil(t, tc)
	return context.WithValue(context.Background(), connKey{}, tc)
}

func TestConnLimiter_Defaults(t *testing.T) {
	l := newConnLimiter(ServerLimits{})
	assert.Equal(t, DefaultMaxConns, l.maxConns)
	assert.Equal(t, DefaultMaxUnauthConns, l.maxUnauth)
	l = newConnLimiter(ServerLimits{MaxConns: 3, MaxUnauthConns: 10})
	assert.Equal(t, 3, l.maxUnauth, "never above MaxConns")
}
