package pgstore_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/faultproxy"
	"github.com/xagentkit/imv2/pgstore"
)

// Sizes of the failover run: small enough for CI on two loaded cores.
const (
	foDeltas    = 40  // deltas of each streamed reply
	foBurst     = 200 // user messages of the burst the second kill interrupts
	foReplyEach = 10  // every foReplyEach-th burst message asks for a reply
)

// ---- the IM platform: in the test process, shared by the replicas ----

// foPlatform deduplicates finals by idempotency key (what a platform with
// its own dedup shows) and counts every post (what one without would
// show). Drafts and failures are counted.
type foPlatform struct {
	mu       sync.Mutex
	posts    map[string]int    // every post per message_id
	shown    map[string]bool   // by key
	keyOf    map[string]string // message_id → key of its first post
	badKey   []string          // a post whose key differs from the first
	drafts   map[string]int    // per message_id
	failed   []string          // user messages a replica reported failed
	lastPost time.Time
	// holdID's first post is shown and then not answered until the
	// replica's connection goes: the kill lands between the side effect
	// and Record, the window of an orphaned claim.
	holdID string
	held   chan struct{}
	again  time.Time // holdID's second post
}

func newFoPlatform() *foPlatform {
	return &foPlatform{posts: map[string]int{}, shown: map[string]bool{}, keyOf: map[string]string{}, drafts: map[string]int{}}
}

func (p *foPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b postBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.URL.Path {
	case "/post":
		p.posts[b.MessageID]++
		if k, ok := p.keyOf[b.MessageID]; !ok {
			p.keyOf[b.MessageID] = b.Key
		} else if k != b.Key {
			p.badKey = append(p.badKey, b.MessageID)
		}
		p.shown[b.Key] = true
		p.lastPost = time.Now()
		if b.MessageID == p.holdID && p.posts[b.MessageID] == 2 {
			p.again = time.Now()
		}
		if b.MessageID == p.holdID && p.posts[b.MessageID] == 1 {
			p.mu.Unlock()
			close(p.held)
			<-r.Context().Done() // the replica died with the post done, unrecorded
			p.mu.Lock()
		}
	case "/draft":
		p.drafts[b.MessageID]++
	case "/failed":
		p.failed = append(p.failed, b.MessageID+": "+b.Code)
	}
}

func (p *foPlatform) draftsOf(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drafts[id]
}

// ---- replicas: child processes ----

type foReplica struct {
	name, addr string
	cmd        *exec.Cmd
	proxy      *faultproxy.Proxy
	killed     bool
}

func startFoReplica(t *testing.T, name, db, platform string, faults faultproxy.Faults) *foReplica {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envReplica+"="+name, envDB+"="+db, envPlatform+"="+platform)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("replica %s did not start: %q %v", name, line, err)
	}
	r := &foReplica{name: name, addr: addr, cmd: cmd, proxy: faultproxy.New("ws://"+addr+"/ws", faults)}
	t.Cleanup(func() { r.kill(); r.proxy.Close() })
	return r
}

// kill sends SIGKILL: no Close, no flush, no goodbye.
func (r *foReplica) kill() {
	if r.killed {
		return
	}
	r.killed = true
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

// user hands the replica a user message; an error means it may or may
// not have been accepted (the caller retries with the same message_id).
func (r *foReplica) user(ctx context.Context, ch, id, text string) error {
	body, _ := json.Marshal(userBody{Channel: ch, MessageID: id, Text: text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.addr+"/user", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return errors.New(strings.TrimSpace(string(msg)))
	}
	return nil
}

// ---- the router: a load balancer that sends xAgent to a live replica ----

// foRouter serves the Card and routes each /ws connection to the first
// replica in its list that accepts a TCP connection (a health check by
// dial, as a load balancer's), through that replica's fault proxy.
type foRouter struct {
	mu       sync.Mutex
	replicas []*foReplica
	routed   map[string]int
}

func (rt *foRouter) set(rs ...*foReplica) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.replicas = rs
}

func (rt *foRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/connector-card.json" {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
		return
	}
	rt.mu.Lock()
	rs := slices.Clone(rt.replicas)
	rt.mu.Unlock()
	for _, rep := range rs {
		c, err := net.DialTimeout("tcp", rep.addr, 200*time.Millisecond)
		if err != nil {
			continue
		}
		c.Close()
		rt.mu.Lock()
		rt.routed[rep.name]++
		rt.mu.Unlock()
		rep.proxy.ServeHTTP(w, r)
		return
	}
	http.Error(w, "no live replica", http.StatusBadGateway)
}

// ---- xAgent: in the test process ----

// foAgent counts user messages and answers "reply …" with a streamed
// reply of foDeltas deltas and a final.
type foAgent struct {
	client atomic.Pointer[dataplane.Client]
	ctx    context.Context
	wg     sync.WaitGroup
	pace   atomic.Int64 // delay between deltas, ns
	deltas atomic.Int64 // deltas sent, all replies

	mu    sync.Mutex
	users map[string]int
	first map[string]time.Time // first arrival
}

func (a *foAgent) PostMessage(_ context.Context, channelID string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	a.users[m.MessageID]++
	first := a.users[m.MessageID] == 1
	if first {
		a.first[m.MessageID] = time.Now()
	}
	a.mu.Unlock()
	if first && strings.HasPrefix(m.Text, "reply ") {
		a.wg.Add(1)
		go a.reply(channelID, m.MessageID)
	}
	return nil
}

func (a *foAgent) reply(channelID, userID string) {
	defer a.wg.Done()
	r, err := a.client.Load().NewReply(channelID, "r-"+userID)
	if err != nil {
		return
	}
	var text strings.Builder
	for i := 1; i <= foDeltas; i++ {
		piece := fmt.Sprintf("%s·%02d ", userID, i)
		text.WriteString(piece)
		_ = r.Delta(a.ctx, piece) // best effort (D5): lost across a kill
		a.deltas.Add(1)
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(time.Duration(a.pace.Load())):
		}
	}
	for a.ctx.Err() == nil {
		_, err := r.Final(a.ctx, imv2.ChatMessage{Text: text.String()})
		if err == nil || !errors.Is(err, &imv2.Error{Code: imv2.CodePendingFull}) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (a *foAgent) arrivedAfter(t0 time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var best time.Time
	for _, at := range a.first {
		if at.After(t0) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	return best, !best.IsZero()
}

// acks records when xAgent received each accepted ack of a final.
type acks struct {
	mu       sync.Mutex
	accepted []time.Time
	connects []time.Time // hello.ack of each connection
	failed   []string
	done     map[string]bool
}

func (k *acks) Observe(e imv2.Event) {
	if e.Kind == imv2.EventAcked && e.Status == imv2.AckAccepted {
		k.mu.Lock()
		k.accepted = append(k.accepted, time.Now())
		k.mu.Unlock()
	}
}

// reconnected returns the first hello.ack after t0.
func (k *acks) reconnected(t0 time.Time) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return firstAfter(k.connects, t0)
}

// firstAfter returns the first accepted ack on the connection made after
// t0 (an ack of the killed replica still in a socket buffer does not count).
func (k *acks) firstAfter(t0 time.Time) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := firstAfter(k.connects, t0)
	if !ok {
		return c, false
	}
	return firstAfter(k.accepted, c)
}

func firstAfter(ts []time.Time, t0 time.Time) (time.Time, bool) {
	for _, at := range ts {
		if at.After(t0) {
			return at, true
		}
	}
	return time.Time{}, false
}

// inFlight is what was unresolved at a kill: user messages pending in the
// shared store, finals pending at xAgent, and claims of running Target
// calls.
type inFlight struct{ users, finals, claims int }

func countInFlight(ctx context.Context, t *testing.T, db string, xc *dataplane.Client, x string) inFlight {
	st := openStore(t, db, pgstore.Options{})
	defer st.Close()
	var f inFlight
	if l, err := st.List(ctx, x); err == nil {
		f.users = len(l)
	}
	if l, err := pendingOf(ctx, xc, x); err == nil {
		f.finals = len(l)
	}
	if s, err := st.Stats(ctx); err == nil {
		f.claims = s.Claims
	}
	return f
}

// TestFailover_S8_A6_KillHolderMidStreamMidBurstMidPost runs xAgent against
// two Connector replicas (child processes) on one PostgreSQL database,
// through a router and fault proxies. It kills with SIGKILL the replica
// holding xAgent's connection in the middle of a streamed reply, starts a
// fresh replica, kills the other in the middle of a burst of user
// messages accepted on both, starts another, and kills the holder between
// a final's post and its Record (the platform holds that post's answer):
// the orphaned claim is taken over after its lease and posted again with
// the same idempotency key. Invariants: every user message reaches
// xAgent's Target exactly once, every final is shown once on the
// (deduplicating) platform under one stable key, nothing failed, nothing
// is left pending, the pending cap held, and the test's goroutines are
// gone. It prints the failover times, what was in flight at each kill,
// and how often a platform without dedup would have shown a final twice
// (exactly once: the aimed kill; with PostsIdempotently false that final
// is shown once and xAgent is told delivery_outcome_unknown instead).
func TestFailover_S8_A6_KillHolderMidStreamMidBurstMidPost(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db := srv.NewDatabase(t)
	plat := newFoPlatform()
	ps := httptest.NewServer(plat)
	defer ps.Close()
	faults := faultproxy.Faults{Drop: 0.01, Duplicate: 0.01, Delay: 0.02, MaxDelay: 10 * time.Millisecond, Seed: 1}

	a := startFoReplica(t, "a", db, ps.URL, faults)
	b := startFoReplica(t, "b", db, ps.URL, faults)
	rt := &foRouter{routed: map[string]int{}}
	rt.set(a, b)
	rs := httptest.NewServer(rt)
	defer rs.Close()

	actx, acancel := context.WithCancel(context.Background())
	defer acancel()
	ag := &foAgent{ctx: actx, users: map[string]int{}, first: map[string]time.Time{}}
	ag.pace.Store(int64(10 * time.Millisecond))
	ak := &acks{done: map[string]bool{}}
	xPend := newXPending()
	client, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: rs.URL, Target: ag,
		Options: &imv2.Options{
			Pending:    xPend,
			AckTimeout: replicaAckTimeout, RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
			Observer: ak,
			OnFailed: func(_ string, m imv2.ChatMessage, e *imv2.Error) {
				ak.mu.Lock()
				defer ak.mu.Unlock()
				ak.failed = append(ak.failed, m.MessageID+": "+string(e.Code))
			},
		},

		OnConnected: func(string, []string) {
			ak.mu.Lock()
			defer ak.mu.Unlock()
			ak.connects = append(ak.connects, time.Now())
		},
		Advanced: dataplane.ClientAdvanced{CardID: consolebridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond, RequestTimeout: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	trackPending(t, client, xPend)
	ag.client.Store(client)
	x, err := client.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	chID := x
	connectorID := client.ConnectorID()

	var peakPending atomic.Int64
	sampleStop := make(chan struct{})
	sampleDone := make(chan struct{})
	go func() { // the pending cap, seen from the database
		defer close(sampleDone)
		st, err := pgstore.Open(ctx, db, pgstore.Options{})
		if err != nil {
			return
		}
		defer st.Close()
		for {
			if l, err := st.List(ctx, chID); err == nil && int64(len(l)) > peakPending.Load() {
				peakPending.Store(int64(len(l)))
			}
			select {
			case <-sampleStop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	var ids []string // every user message, in the order handed over
	send := func(prefer []*foReplica, id, text string) {
		ids = append(ids, id)
		for ctx.Err() == nil {
			for _, r := range prefer {
				if r.killed {
					continue
				}
				if err := r.user(ctx, chID, id, text); err == nil {
					return
				}
			}
			time.Sleep(10 * time.Millisecond) // pending_full, or the replica died mid-request
		}
	}

	// Phase 1: a streamed reply; kill a (holding the connection) mid-stream.
	send([]*foReplica{a}, "u-0000", "reply u-0000")
	for (ag.deltas.Load() < foDeltas/3 || plat.draftsOf("r-u-0000") == 0) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	in1 := countInFlight(ctx, t, db, client, x)
	deltasAtKill1 := ag.deltas.Load()
	kill1 := time.Now()
	a.kill()
	conn1, ackAfter1 := waitAck(ctx, ak, kill1)
	// A fresh replica takes a's place, last in the router's list.
	c := startFoReplica(t, "c", db, ps.URL, faults)
	rt.set(b, c)
	for !settledFinal(plat, "r-u-0000") && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}

	// Phase 2: a burst of user messages, alternately to b (holding the
	// connection) and c (not: its Relay hands them to b); kill b halfway.
	ag.pace.Store(int64(time.Millisecond))
	var kill2 time.Time
	var in2 inFlight
	for i := 1; i <= foBurst; i++ {
		id := fmt.Sprintf("u-%04d", i)
		text := "note " + id
		if i%foReplyEach == 0 {
			text = "reply " + id
		}
		if i == foBurst/2 {
			in2 = countInFlight(ctx, t, db, client, x)
			kill2 = time.Now()
			b.kill()
		}
		if i%2 == 0 {
			send([]*foReplica{b, c}, id, text)
		} else {
			send([]*foReplica{c, b}, id, text)
		}
	}
	conn2, ackAfter2 := waitAck(ctx, ak, kill2)
	arrive2 := waitArrival(ctx, ag, kill2.Add(conn2)) + conn2

	// Phase 3: kill the holder (c) between a final's post and its Record.
	d := startFoReplica(t, "d", db, ps.URL, faults)
	rt.set(c, d)
	plat.mu.Lock()
	plat.holdID, plat.held = "r-u-9000", make(chan struct{})
	plat.mu.Unlock()
	send([]*foReplica{c}, "u-9000", "reply u-9000")
	select {
	case <-plat.held:
	case <-ctx.Done():
	}
	in3 := countInFlight(ctx, t, db, client, x)
	kill3 := time.Now()
	c.kill()
	conn3, ackAfter3 := waitAck(ctx, ak, kill3)

	// Settle: every user message at xAgent, every final shown, nothing pending.
	st, err := pgstore.Open(ctx, db, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	settled := func() bool {
		ag.mu.Lock()
		n := len(ag.users)
		ag.mu.Unlock()
		if n < len(ids) {
			return false
		}
		for _, id := range ids {
			if strings.HasSuffix(id, "0") && !settledFinal(plat, "r-"+id) {
				return false
			}
		}
		l, err := st.List(ctx, chID)
		p, _ := pendingOf(ctx, client, x)
		return err == nil && len(l) == 0 && len(p) == 0
	}
	for !settled() && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(began)
	stats, _ := st.Stats(context.Background())
	claimsLeft := stats.Claims
	var pendingLeft []string
	if l, err := st.List(context.Background(), chID); err == nil {
		for _, e := range l {
			pendingLeft = append(pendingLeft, e.Message.MessageID)
		}
	}
	st.Close()

	finalConnectorID := client.ConnectorID()
	acancel()
	_ = client.Close()
	ag.wg.Wait()
	close(sampleStop)
	<-sampleDone
	d.kill()
	rs.Close()
	for _, r := range []*foReplica{a, b, c, d} {
		r.proxy.Close()
	}
	ps.Close()

	// Figures and invariants.
	lost, dup := 0, 0
	var lostIDs []string
	for _, id := range ids {
		switch n := ag.users[id]; {
		case n == 0:
			lost++
			lostIDs = append(lostIDs, id)
		case n > 1:
			dup += n - 1
		}
	}
	finals, lostFinals, twice := 0, 0, 0
	for _, id := range ids {
		if id != "u-0000" && !strings.HasSuffix(id, "0") {
			continue
		}
		finals++
		fid := "r-" + id
		switch n := plat.posts[fid]; {
		case n == 0 || !plat.shown[plat.keyOf[fid]]:
			lostFinals++
		case n > 1:
			twice += n - 1 // an orphan taken over: a platform without dedup shows it again
		}
	}
	var pst faultproxy.Stats
	for _, r := range []*foReplica{a, b, c, d} {
		s := r.proxy.Stats()
		pst.Conns += s.Conns
		pst.Frames += s.Frames
		pst.Dropped += s.Dropped
		pst.Duplicated += s.Duplicated
		pst.Delayed += s.Delayed
	}
	t.Logf("failover: 3 kill -9 of the replica holding the connection, %d user messages, %d finals of %d deltas, %v",
		len(ids), finals, foDeltas, elapsed.Round(time.Millisecond))
	t.Logf("kill 1 (mid-stream, %d of %d deltas sent): in flight %d user, %d finals, %d claims; reconnected to the survivor after %v, first accepted ack there after %v",
		deltasAtKill1, foDeltas, in1.users, in1.finals, in1.claims, conn1.Round(time.Millisecond), ackAfter1.Round(time.Millisecond))
	t.Logf("kill 2 (mid-burst, %d of %d handed over): in flight %d user, %d finals, %d claims; reconnected after %v, first user message from the survivor after %v, first accepted ack after %v",
		foBurst/2-1, foBurst, in2.users, in2.finals, in2.claims, conn2.Round(time.Millisecond), arrive2.Round(time.Millisecond), ackAfter2.Round(time.Millisecond))
	t.Logf("kill 3 (between a final's post and its Record): in flight %d user, %d finals, %d claims; reconnected after %v, first accepted ack after %v, the orphaned final posted again (same key) after %v (its claim's lease: %v)",
		in3.users, in3.finals, in3.claims, conn3.Round(time.Millisecond), ackAfter3.Round(time.Millisecond), plat.again.Sub(kill3).Round(time.Millisecond), 3*replicaTargetTimeout)
	t.Logf("outcome: lost %d+%d, user messages twice %d, finals shown twice (deduplicating platform: posted under a second key) %d, posted twice (what a platform without dedup shows) %d, failed %d+%d, claims left %d",
		lost, lostFinals, dup, len(plat.badKey), twice, len(plat.failed), len(ak.failed), claimsLeft)
	t.Logf("routing: %v; faults: conns %d frames %d dropped %d duplicated %d delayed %d; pending peak %d (cap %d)",
		rt.routed, pst.Conns, pst.Frames, pst.Dropped, pst.Duplicated, pst.Delayed, peakPending.Load(), replicaPendingCap)

	if ctx.Err() != nil {
		t.Errorf("did not settle in time: users %d/%d", len(ag.users), len(ids))
	}
	if lost+lostFinals > 0 {
		t.Errorf("lost: %d user messages %v, %d finals; left pending in the store %d (%s)", lost, lostIDs, lostFinals, stats.Pending, pendingLeft)
	}
	if dup > 0 {
		t.Errorf("%d user messages reached xAgent's Target twice", dup)
	}
	if len(plat.badKey) > 0 {
		t.Errorf("finals posted again under another idempotency key: %v", plat.badKey)
	}
	if len(plat.failed)+len(ak.failed) > 0 {
		t.Errorf("failed: connector %v, xAgent %v", plat.failed, ak.failed)
	}
	if stats.Completed > imv2.DefaultCompletedCap || stats.Pending != 0 {
		t.Errorf("store at the end: %d completed (cap %d), %d pending (want 0)", stats.Completed, imv2.DefaultCompletedCap, stats.Pending)
	}
	if peakPending.Load() > replicaPendingCap {
		t.Errorf("pending peak %d passed the cap %d", peakPending.Load(), replicaPendingCap)
	}
	// Only a final whose claim was live at a kill can be posted again (the
	// orphan taken over after its lease, same key); the aimed one must be.
	if orphans := in1.claims + in2.claims + in3.claims; plat.posts["r-u-9000"] != 2 || twice > orphans {
		t.Errorf("the kill between post and Record: r-u-9000 posted %d times, %d posted twice in all; want it posted again once (the orphan taken over), and no more finals posted twice than the %d claims live at the kills", plat.posts["r-u-9000"], twice, orphans)
	}
	if finalConnectorID != connectorID {
		t.Errorf("connector_id changed across the failovers: %q, then %q", connectorID, finalConnectorID)
	}
	if rt.routed["b"] == 0 || rt.routed["c"] == 0 || rt.routed["d"] == 0 {
		t.Errorf("xAgent was not routed to each survivor: %v", rt.routed)
	}
	settleGoroutines(t, goroutines)
}

func settledFinal(p *foPlatform, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts[id] > 0
}

// waitAck returns how long after t0 xAgent reconnected and got its first
// accepted ack on the new connection.
func waitAck(ctx context.Context, k *acks, t0 time.Time) (reconnect, ack time.Duration) {
	for ctx.Err() == nil {
		if at, ok := k.firstAfter(t0); ok {
			c, _ := k.reconnected(t0)
			return c.Sub(t0), at.Sub(t0)
		}
		time.Sleep(time.Millisecond)
	}
	return -1, -1
}

// waitArrival returns how long after t0 (the reconnect) the first user
// message reached xAgent's Target.
func waitArrival(ctx context.Context, a *foAgent, t0 time.Time) time.Duration {
	for ctx.Err() == nil {
		if at, ok := a.arrivedAfter(t0); ok {
			return at.Sub(t0)
		}
		time.Sleep(time.Millisecond)
	}
	return -1
}

// settleGoroutines waits for the goroutine count to come back to where the
// test started (closing sockets take a moment).
func settleGoroutines(t *testing.T, start int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > start && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if now := runtime.NumGoroutine(); now > start {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("goroutines: %d at start, %d after close\n%s", start, now, buf)
	}
}
