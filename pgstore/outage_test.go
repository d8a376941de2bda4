package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/pgstore/internal/pgtest"
	"github.com/xagentkit/imv2/state"
)

// settleAfterReturn is the bound issue 27 sets: after the database is
// back, a move made during the outage settles within it.
const settleAfterReturn = 5 * time.Second

// ownServer starts a PostgreSQL server of t's own, which t may stop and
// restart without taking the shared one from the other tests.
func ownServer(t *testing.T) *pgtest.Server {
	t.Helper()
	own, err := pgtest.StartOwn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := own.Stop(); err != nil {
			t.Error(err)
		}
	})
	return own
}

// router is one URL in front of the replicas, as a load balancer: each
// new connection goes to the replica it routes to now.
type router struct {
	to atomic.Pointer[replica]
	hs *httptest.Server
}

func newRouter(t *testing.T, first *replica) *router {
	r := &router{}
	r.to.Store(first)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, req *http.Request) { r.to.Load().srv.ServeHTTP(w, req) })
	r.hs = httptest.NewServer(mux)
	t.Cleanup(r.hs.Close)
	return r
}

// cutConn is the Conn of the xAgent client, which the test cuts as a
// network failure (or a replica's death) would.
type cutConn struct {
	cur atomic.Pointer[dataplane.Conn]
}

func (c *cutConn) wrap(conn dataplane.Conn) dataplane.Conn {
	c.cur.Store(&conn)
	return conn
}

func (c *cutConn) cut() {
	if p := c.cur.Load(); p != nil {
		_ = (*p).Close()
	}
}

// TestOutage_W11_MoveDuringOutageSettles: xAgent holds a channel on
// replica a; PostgreSQL stops (fast shutdown), and xAgent's connection
// moves to replica b while it is down, with finals of xAgent pending.
// Once the database is back, within 5 s: xAgent is on b under the same
// connector_id with the channel under its ID, every final is posted once
// and acknowledged, and a user message accepted on b reaches xAgent. Ten
// outages, each with a move back and forth, settle the same way.
func TestOutage_W11_MoveDuringOutageSettles(t *testing.T) {
	own := ownServer(t)
	url := own.NewDatabase(t)
	ctx := context.Background()
	plat := newKeyPlatform(false)
	opts := imv2.Options{TargetTimeout: time.Second}
	replicas := [2]*replica{startReplica(t, url, plat, opts), startReplica(t, url, plat, opts)}
	rt := newRouter(t, replicas[0])
	agent := newKeyPlatform(false)
	var cc cutConn
	store := state.NewMemoryChannelStore(0)
	pend := newXPending()
	x, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: rt.hs.URL, Target: agent, Store: store,
		Options:  &imv2.Options{Pending: pend, AckTimeout: 500 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond},
		Advanced: dataplane.ClientAdvanced{CardID: consolebridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond, WrapConn: cc.wrap},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	trackPending(t, x, pend)
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cid := x.ConnectorID()

	const rounds = 10
	for round := range rounds {
		from, to := replicas[round%2], replicas[(round+1)%2]
		if err := own.Halt(); err != nil {
			t.Fatal(err)
		}
		rt.to.Store(to)
		cc.cut() // xAgent reconnects, to the other replica, while the database is down
		var finals []string
		for i := range 3 {
			id := fmt.Sprintf("f-%d-%d", round, i)
			finals = append(finals, id)
			if _, err := x.Send(ctx, ch, imv2.ChatMessage{MessageID: id, Text: "reply"}); err != nil {
				t.Fatalf("round %d: %s: %v", round, id, err)
			}
		}
		time.Sleep(300 * time.Millisecond) // the outage: reconnects meet a database that is away
		if err := own.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		settled := func() bool {
			if !to.srv.IsOpen(ch) || x.Resolve(ch) != ch || x.Negotiated(ch) == nil { // held under its own ID
				return false
			}
			p, _ := pendingOf(ctx, x, ch)
			return len(p) == 0
		}
		for !settled() {
			if time.Since(back) > settleAfterReturn {
				p, _ := pendingOf(ctx, x, ch)
				t.Fatalf("round %d: not settled %v after the database returned: open on the new replica %v (on the old %v), connector_id %s (was %s), channels %v, %d finals pending",
					round, settleAfterReturn, to.srv.IsOpen(ch), from.srv.IsOpen(ch), x.ConnectorID(), cid, to.srv.ChannelIDs(), len(p))
			}
			time.Sleep(5 * time.Millisecond) // polling real processes; the bound is checked above
		}
		u := fmt.Sprintf("u-%d", round)
		if _, err := to.relay.Send(ctx, ch, imv2.ChatMessage{MessageID: u, Text: "hello"}); err != nil {
			t.Fatalf("round %d: user message after the return: %v", round, err)
		}
		for agent.count(u) == 0 {
			if time.Since(back) > settleAfterReturn {
				t.Fatalf("round %d: user message %s accepted on the new replica did not reach xAgent within %v of the database's return", round, u, settleAfterReturn)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("round %d settled %v after the database returned", round, time.Since(back).Round(time.Millisecond))
		if got := x.ConnectorID(); got != cid {
			t.Fatalf("round %d: connector_id %s, want %s kept across the outage", round, got, cid)
		}
		for _, id := range finals {
			if n := plat.count(id); n != 1 {
				t.Errorf("round %d: final %s posted %d times, want 1", round, id, n)
			}
		}
	}
	for round := range rounds {
		if n := agent.count(fmt.Sprintf("u-%d", round)); n != 1 {
			t.Errorf("user message u-%d reached xAgent %d times, want 1", round, n)
		}
	}
}
