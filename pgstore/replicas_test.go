package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// keyPlatform is an IM platform shared by the replicas of a test: it
// counts every post per message_id (what a platform without dedup shows)
// and the posts it shows when it deduplicates by idempotency key.
type keyPlatform struct {
	idempotent bool

	mu    sync.Mutex
	posts map[string]int // every PostMessage call
	shown map[string]int // by idempotency key: what the user sees
	keys  map[string]string
	order []string
	seen  chan string
}

func newKeyPlatform(idempotent bool) *keyPlatform {
	return &keyPlatform{idempotent: idempotent, posts: map[string]int{}, shown: map[string]int{}, keys: map[string]string{}, seen: make(chan string, 4096)}
}

func (p *keyPlatform) PostMessage(ctx context.Context, _ string, m *imv2.ChatMessage) error {
	key, _ := imv2.IdempotencyKey(ctx)
	p.mu.Lock()
	p.posts[m.MessageID]++
	p.keys[m.MessageID] = key
	if p.shown[key] == 0 || !p.idempotent {
		p.order = append(p.order, m.MessageID)
	}
	p.shown[key]++
	p.mu.Unlock()
	p.seen <- m.MessageID
	return nil
}

func (p *keyPlatform) PostsIdempotently() bool { return p.idempotent }

func (p *keyPlatform) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts[id]
}

// replica is one Connector process of a test: a Server on its own Store
// of the shared database, its Relay and its HTTP front (Card and /ws).
type replica struct {
	st    *pgstore.Store
	srv   *dataplane.Server
	relay *pgstore.Relay
	hs    *httptest.Server
	stop  func()
}

func startReplica(t *testing.T, url string, target imv2.Target, opts imv2.Options, tune ...func(*dataplane.ServerConfig)) *replica {
	t.Helper()
	st := openStore(t, url, pgstore.Options{})
	r := &replica{st: st, relay: pgstore.NewRelay(st)}
	opts.Pending, opts.Completed = st.Pending(), st.Completed()
	cfg := dataplane.ServerConfig{
		Card:          consolebridge.Card(),
		NewTarget:     func(string) imv2.Target { return target },
		Options:       &opts,
		Registry:      st,
		OnChannelOpen: r.relay.ChannelOpened,
	}
	for _, f := range tune {
		f(&cfg)
	}
	srv, err := dataplane.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	r.relay.Serve(srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.relay.Run(ctx) }()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
	})
	mux.Handle("/ws", srv)
	r.hs = httptest.NewServer(mux)
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			r.hs.CloseClientConnections()
			r.hs.Close()
			_ = srv.Close()
			cancel()
			<-done
		})
	}
	t.Cleanup(r.stop)
	return r
}

// xagent dials a replica as xAgent, with target receiving user messages.
// ids are channel IDs to reopen (as a restarted xAgent does).
func xagent(t *testing.T, url string, target imv2.Target, ids ...string) *dataplane.Client {
	t.Helper()
	return xagentOpts(t, url, target, imv2.Options{}, ids...)
}

// xagentOpts is xagent with Channel options (their timings are set here).
func xagentOpts(t *testing.T, url string, target imv2.Target, o imv2.Options, ids ...string) *dataplane.Client {
	t.Helper()
	return xagentAs(t, url, target, o, "", ids...)
}

// xagentAs is xagentOpts for an xAgent that remembers connectorID.
func xagentAs(t *testing.T, url string, target imv2.Target, o imv2.Options, connectorID string, ids ...string) *dataplane.Client {
	t.Helper()
	o.AckTimeout, o.RetryMin, o.RetryMax = 500*time.Millisecond, 20*time.Millisecond, 200*time.Millisecond
	store := state.NewMemoryChannelStore(0)
	if err := store.SetConnectorID(context.Background(), connectorID); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := store.AddChannel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	pend := newXPending()
	o.Pending = pend
	c, err := dataplane.Dial(context.Background(), dataplane.ClientConfig{
		URL: url, Target: target, Store: store,
		Options:  &o,
		Advanced: dataplane.ClientAdvanced{CardID: consolebridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	trackPending(t, c, pend)
	return c
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReplicas_S8_A6_SameFinalAtBothReplicasPostsOnce: two xAgent
// connections, one to each replica, hold the same channel (its ID is in
// the shared registry) and send the same final at once, many times over;
// the platform shows each final once, and both senders see it delivered
// (accepted on one side, duplicate or accepted-after-busy on the other).
func TestReplicas_S8_A6_SameFinalAtBothReplicasPostsOnce(t *testing.T) {
	url := srv.NewDatabase(t)
	plat := newKeyPlatform(false)
	opts := imv2.Options{TargetTimeout: 2 * time.Second}
	a := startReplica(t, url, plat, opts)
	b := startReplica(t, url, plat, opts)
	ctx := context.Background()
	nop := newKeyPlatform(false)
	x1 := xagent(t, a.hs.URL, nop)
	ch1, err := x1.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	x2 := xagent(t, b.hs.URL, nop, ch1)
	waitFor(t, "the channel reopened on replica b", func() bool { return b.srv.IsOpen(ch1) })
	if x2.Resolve(ch1) != ch1 || x2.Negotiated(ch1) == nil {
		t.Fatalf("replica b issued another channel ID: %v", b.srv.ChannelIDs())
	}
	const n = 40
	for i := range n {
		m := imv2.ChatMessage{MessageID: fmt.Sprintf("r-%02d", i), Text: "reply"}
		var wg sync.WaitGroup
		for _, x := range []*dataplane.Client{x1, x2} {
			wg.Go(func() {
				if _, err := x.Send(ctx, ch1, m); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	waitFor(t, "both senders' finals acknowledged", func() bool {
		p1, _ := pendingOf(ctx, x1, ch1)
		p2, _ := pendingOf(ctx, x2, ch1)
		return len(p1)+len(p2) == 0
	})
	for i := range n {
		if c := plat.count(fmt.Sprintf("r-%02d", i)); c != 1 {
			t.Errorf("final r-%02d posted %d times, want 1", i, c)
		}
	}
}

// TestReplicas_S1_UserMessageOnOtherReplicaReachesXAgentOnceInOrder:
// xAgent holds its connection on replica a; user messages accepted on
// replica b (which has never seen the channel) reach xAgent through a,
// each once and in the order b accepted them, and a reports them
// delivered.
func TestReplicas_S1_UserMessageOnOtherReplicaReachesXAgentOnceInOrder(t *testing.T) {
	url := srv.NewDatabase(t)
	var mu sync.Mutex
	delivered := map[string]bool{}
	opts := imv2.Options{OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
		mu.Lock()
		defer mu.Unlock()
		delivered[m.MessageID] = true
	}}
	plat := newKeyPlatform(false)
	a := startReplica(t, url, plat, opts)
	b := startReplica(t, url, plat, imv2.Options{})
	ctx := context.Background()
	agent := newKeyPlatform(false)
	x := xagent(t, a.hs.URL, agent)
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.srv.Channel(ch) != nil {
		t.Fatal("replica b holds the channel; the test needs it not to")
	}
	const n = 50
	var want []string
	for i := range n {
		id := fmt.Sprintf("u-%02d", i)
		want = append(want, id)
		if _, err := b.relay.Send(ctx, ch, imv2.ChatMessage{MessageID: id, Text: "hello " + id}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every user message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == n
	})
	agent.mu.Lock()
	order := append([]string(nil), agent.order...)
	agent.mu.Unlock()
	if !slices.Equal(order, want) {
		t.Errorf("xAgent received %v, want %v", order, want)
	}
	for _, id := range want {
		if c := agent.count(id); c != 1 {
			t.Errorf("%s reached xAgent's Target %d times, want 1", id, c)
		}
	}
	if left, _ := a.st.List(ctx, ch); len(left) != 0 {
		t.Errorf("%d pending left", len(left))
	}
	var e *imv2.Error
	if _, err := b.relay.Send(ctx, "cch_unknown", imv2.ChatMessage{Text: "x"}); !errors.As(err, &e) || e.Code != protocol.CodeConnectionNotFound {
		t.Errorf("send to an unregistered channel: %v, want connection_not_found", err)
	}
}

// TestReplicas_S8_OrphanTakenOverAfterLease: a replica claimed a final,
// began and made its post, and died before Record (its claim is left,
// with a short lease). The
// resend to the surviving replica is answered retryable busy while the
// lease runs, then taken over: posted again with the same idempotency key
// to a deduplicating platform, which shows it once; to a platform without
// dedup it is not posted, and the sender is told
// delivery_outcome_unknown.
func TestReplicas_S8_OrphanTakenOverAfterLease(t *testing.T) {
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idem), func(t *testing.T) {
			url := srv.NewDatabase(t)
			ctx := context.Background()
			plat := newKeyPlatform(idem)
			var mu sync.Mutex
			var failed []imv2.Code
			b := startReplica(t, url, plat, imv2.Options{})
			x := xagentOpts(t, b.hs.URL, newKeyPlatform(false), imv2.Options{
				OnFailed: func(_ string, _ imv2.ChatMessage, e *imv2.Error) {
					mu.Lock()
					defer mu.Unlock()
					failed = append(failed, e.Code)
				},
			})
			ch, err := x.OpenChannel(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			// The dead replica's claim: the post happened (the platform
			// saw it with the key), Record never ran.
			key := imv2.IdempotencyKeyOf(ch, "r-1")
			final := imv2.ChatMessage{MessageID: "r-1", Text: "reply"}
			pctx := imv2.WithIdempotencyKey(ctx, key)
			if err := plat.PostMessage(pctx, ch, &final); err != nil {
				t.Fatal(err)
			}
			<-plat.seen
			lease := 300 * time.Millisecond
			cl, err := b.st.Claim(ctx, ch, "r-1", imv2.FingerprintOf(&final), "dead-replica", lease)
			if err != nil || cl.State != imv2.ClaimAcquired {
				t.Fatalf("claim: %+v %v", cl, err)
			}
			// It told the store the post began before posting, as a
			// Channel does (imv2.ClaimStarter).
			if err := b.st.Begin(ctx, ch, "r-1", "dead-replica"); err != nil {
				t.Fatal(err)
			}
			if _, err := x.Send(ctx, ch, final); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the final resolved", func() bool {
				p, _ := pendingOf(ctx, x, ch)
				return len(p) == 0
			})
			plat.mu.Lock()
			posts, shown, gotKey, order := plat.posts["r-1"], plat.shown[key], plat.keys["r-1"], len(plat.order)
			plat.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			if gotKey != key {
				t.Errorf("idempotency key %q, want %q", gotKey, key)
			}
			if idem {
				if posts != 2 || !plat.idempotent {
					t.Errorf("posts %d, want 2 (the dead replica's and the takeover)", posts)
				}
				if order != 1 {
					t.Errorf("a deduplicating platform shows %d, want 1", order)
				}
				if len(failed) != 0 {
					t.Errorf("failed: %v", failed)
				}
			} else {
				if posts != 1 || shown != 1 {
					t.Errorf("a platform without dedup got %d posts, want 1 (no re-post)", posts)
				}
				if !slices.Equal(failed, []imv2.Code{imv2.CodeDeliveryOutcomeUnknown}) {
					t.Errorf("sender told %v, want [delivery_outcome_unknown]", failed)
				}
			}
		})
	}
}

// TestReplicas_S8_OrphanNotBegunIsPostedAfterLease: a replica claimed a
// final and died before its Begin (its post never started). The resend
// to the surviving replica is posted once, after the lease, to a platform
// without dedup, and the sender is told nothing: the final is not lost.
func TestReplicas_S8_OrphanNotBegunIsPostedAfterLease(t *testing.T) {
	url := srv.NewDatabase(t)
	ctx := context.Background()
	plat := newKeyPlatform(false)
	var mu sync.Mutex
	var failed []imv2.Code
	b := startReplica(t, url, plat, imv2.Options{})
	x := xagentOpts(t, b.hs.URL, newKeyPlatform(false), imv2.Options{
		OnFailed: func(_ string, _ imv2.ChatMessage, e *imv2.Error) {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, e.Code)
		},
	})
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	final := imv2.ChatMessage{MessageID: "r-1", Text: "reply"}
	cl, err := b.st.Claim(ctx, ch, "r-1", imv2.FingerprintOf(&final), "dead-replica", 300*time.Millisecond)
	if err != nil || cl.State != imv2.ClaimAcquired {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if _, err := x.Send(ctx, ch, final); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the final resolved", func() bool {
		p, _ := pendingOf(ctx, x, ch)
		return len(p) == 0
	})
	plat.mu.Lock()
	posts := plat.posts["r-1"]
	plat.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if posts != 1 || len(failed) != 0 {
		t.Errorf("posts %d, sender told %v; want 1 post, nothing told (its post never began)", posts, failed)
	}
}

// TestReplicas_W5_ReconnectToOtherReplicaKeepsConnectorIDAndGrace: xAgent
// connects to replica b with the connector_id and channel replica a
// issued, then leaves a: b keeps both (the registry is shared). When a's
// offline grace runs out, a releases its copy of the channel and forgets
// nothing shared, since b's heartbeat recorded the connector_id live
// after a saw it go: the channel and the connector_id stay registered.
func TestReplicas_W5_ReconnectToOtherReplicaKeepsConnectorIDAndGrace(t *testing.T) {
	url := srv.NewDatabase(t)
	ctx := context.Background()
	plat := newKeyPlatform(false)
	const grace = time.Second
	short := func(c *dataplane.ServerConfig) { c.OfflineGrace = grace }
	a := startReplica(t, url, plat, imv2.Options{}, short)
	b := startReplica(t, url, plat, imv2.Options{}, short)
	x1 := xagent(t, a.hs.URL, newKeyPlatform(false))
	ch, err := x1.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cid := x1.ConnectorID()
	// xAgent is on b before a notices it gone (a cut a sees late): a's
	// own disconnect is then the newest record, and only b's heartbeat
	// tells a's expiry that the connector_id lives on.
	x2 := xagentAs(t, b.hs.URL, newKeyPlatform(false), imv2.Options{}, cid, ch)
	waitFor(t, "the channel open on b", func() bool { return b.srv.IsOpen(ch) })
	_ = x1.Close()
	waitFor(t, "a sees xAgent gone", func() bool { return !a.srv.IsOpen(ch) })
	if got := x2.ConnectorID(); got != cid {
		t.Errorf("b issued connector_id %q, want %q kept", got, cid)
	}
	if x2.Resolve(ch) != ch || x2.Negotiated(ch) == nil {
		t.Errorf("b did not resume channel %q: %v", ch, b.srv.ChannelIDs())
	}
	waitFor(t, "a's grace to run out", func() bool { return a.srv.Channel(ch) == nil })
	time.Sleep(50 * time.Millisecond) // a's drop goroutines, had it forgotten anything
	if known, err := b.st.Known(ctx, ch); err != nil || !known {
		t.Errorf("channel forgotten by a's grace expiry although open on b: known %v, %v", known, err)
	}
	if _, ok, err := b.st.ConnectorSeen(ctx, cid); err != nil || !ok {
		t.Errorf("connector_id forgotten by a's grace expiry although connected to b: %v %v", ok, err)
	}
	if !b.srv.IsOpen(ch) {
		t.Error("the channel is no longer open on b")
	}
}

// TestReplicas_S1_RelayCatchesUpAfterItsListenConnectionBreaks: the
// holder's listening connection is terminated by the server; user
// messages added on the other replica meanwhile, whose notifications
// nobody heard, are sent once the Relay listens again (its catch-up).
func TestReplicas_S1_RelayCatchesUpAfterItsListenConnectionBreaks(t *testing.T) {
	url := srv.NewDatabase(t)
	ctx := context.Background()
	a := startReplica(t, url, newKeyPlatform(false), imv2.Options{})
	b := startReplica(t, url, newKeyPlatform(false), imv2.Options{})
	agent := newKeyPlatform(false)
	x := xagent(t, a.hs.URL, agent)
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	waitFor(t, "a's Relay listening", func() bool {
		err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed)
		return err == nil && killed > 0
	})
	const n = 10
	for i := range n {
		if _, err := b.relay.Send(ctx, ch, imv2.ChatMessage{MessageID: fmt.Sprintf("u-%d", i), Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every message at xAgent", func() bool {
		agent.mu.Lock()
		defer agent.mu.Unlock()
		return len(agent.posts) == n
	})
	for i := range n {
		if c := agent.count(fmt.Sprintf("u-%d", i)); c != 1 {
			t.Errorf("u-%d reached xAgent %d times, want 1", i, c)
		}
	}
}

// TestReplicas_W5_GraceExpiryWithoutReconnectForgets: a connector_id that
// never comes back to any replica is dropped for good when the grace of
// the replica it left runs out: its channel and connector_id are
// forgotten in the shared registry (real clocks: the replica's own
// disconnect record must not count as "connected elsewhere since").
func TestReplicas_W5_GraceExpiryWithoutReconnectForgets(t *testing.T) {
	url := srv.NewDatabase(t)
	ctx := context.Background()
	dropped := make(chan string, 1)
	a := startReplica(t, url, newKeyPlatform(false), imv2.Options{}, func(c *dataplane.ServerConfig) {
		c.OfflineGrace = 200 * time.Millisecond
		c.OnChannelDrop = func(id string) error { dropped <- id; return nil }
	})
	x := xagent(t, a.hs.URL, newKeyPlatform(false))
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cid := x.ConnectorID()
	_ = x.Close()
	select {
	case id := <-dropped:
		if id != ch {
			t.Fatalf("dropped %q, want %q", id, ch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the channel was not dropped after the grace")
	}
	waitFor(t, "the connector_id forgotten", func() bool {
		_, ok, err := a.st.ConnectorSeen(ctx, cid)
		return err == nil && !ok
	})
	// OnChannelDrop runs before the registry forgets the channel (so no
	// binding outlives its ID): the Forget follows it.
	waitFor(t, "the channel forgotten", func() bool {
		known, err := a.st.Known(ctx, ch)
		return err == nil && !known
	})
}
