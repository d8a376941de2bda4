package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/pgstore"
	"github.com/xagentkit/imv2/state"
)

// dedupPlatform is a chat service that deduplicates posts by idempotency
// key (connector.IdempotentPlatform) and counts, per message ID, the
// posts it received and the ones it showed.
type dedupPlatform struct {
	mu    sync.Mutex
	keys  map[string]bool
	shown map[string]int
	posts map[string]int
}

func (p *dedupPlatform) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts[m.MessageID]++
	if !p.keys[m.IdempotencyKey] {
		p.keys[m.IdempotencyKey] = true
		p.shown[m.MessageID]++
	}
	return nil
}

func (p *dedupPlatform) PostsIdempotently() bool { return true }

func (p *dedupPlatform) counts(id string) (shown, posts int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown[id], p.posts[id]
}

// readyRouter is a load balancer in front of replicas that routes each
// new connection to the first replica whose /readyz answers 200, as a
// readiness-gated one does.
func readyRouter(t *testing.T, replicas ...string) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, base := range replicas {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				continue
			}
			to, err := url.Parse(base)
			if err != nil {
				t.Error(err)
				return
			}
			httputil.NewSingleHostReverseProxy(to).ServeHTTP(w, r) // WebSocket upgrades included
			return
		}
		http.Error(w, "no replica ready", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestLetGo_W11_ReplicaCutOffFromTheDatabaseLetsXAgentGo (issue 38): two
// kit replicas on one database; xAgent is on A and sends finals all the
// time. A's link to PostgreSQL is blackholed for 20 s (B keeps it): within
// StoreLossGrace A closes xAgent's connection and refuses it, /readyz
// says "store unreachable", xAgent reconnects through the load balancer
// to B, and acks resume within 10 s of the cut. When A's link is back it
// answers ready again. Every final is acked and shown once: 0 lost, 0
// twice.
func TestLetGo_W11_ReplicaCutOffFromTheDatabaseLetsXAgentGo(t *testing.T) {
	const partition = 20 * time.Second // finals sent all along: acks flow on B throughout
	ctx := context.Background()
	db := srv.NewDatabase(t)
	proxy, viaProxy := newPGProxy(t, db)
	plat := &dedupPlatform{keys: map[string]bool{}, shown: map[string]int{}, posts: map[string]int{}}
	rctx, cancel := context.WithCancel(ctx)
	var runs sync.WaitGroup
	defer runs.Wait()
	defer cancel()
	replica := func(url string) (*connector.Connector, string) {
		st, err := pgstore.Open(ctx, url, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		relay := pgstore.NewRelay(st)
		k, err := connector.New(kitCard(), plat, &connector.Options{
			Store: st, DefaultConversation: func(string) string { return "room-1" },
			Advanced: connector.Advanced{Relay: relay, Channel: &imv2.Options{TargetTimeout: time.Second}},
		})
		if err != nil {
			t.Fatal(err)
		}
		runs.Add(1)
		go func() { defer runs.Done(); _ = relay.Run(rctx) }()
		base, err := k.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			proxy.set(0, false) // A's Close waits for its store calls
			k.Close()
			st.Close()
		})
		return k, base
	}
	_, aURL := replica(viaProxy)
	_, bURL := replica(db)
	lb := readyRouter(t, aURL, bURL)

	// acked[i] is when final f-i's terminal ack came.
	var mu sync.Mutex
	acked := map[string]time.Time{}
	failed := map[string]*imv2.Error{}
	agent := &kitAgent{users: map[string]int{}}
	x, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: lb.URL, Target: agent, Store: state.NewMemoryChannelStore(0),
		Options: &imv2.Options{AckTimeout: 500 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
			OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
				mu.Lock()
				acked[m.MessageID] = time.Now()
				mu.Unlock()
			},
			OnFailed: func(_ string, m imv2.ChatMessage, e *imv2.Error) {
				mu.Lock()
				failed[m.MessageID] = e
				mu.Unlock()
			},
		},
		Advanced: dataplane.ClientAdvanced{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	ch, err := x.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	send := func(i int) {
		id := fmt.Sprintf("f-%d", i)
		if _, err := x.Send(ctx, ch, imv2.ChatMessage{MessageID: id, Text: "reply " + id}); err != nil {
			t.Fatalf("%s: %v", id, err) // stored as pending: sent again until acked
		}
	}
	i := 0
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range 20 { // a second of traffic on A
		<-tick.C
		send(i)
		i++
	}
	proxy.set(0, true)
	cut, firstAfter := time.Now(), i
	var resumed time.Duration
	for {
		<-tick.C
		send(i)
		i++
		mu.Lock()
		for j := firstAfter; j < i && resumed == 0; j++ {
			if at, ok := acked[fmt.Sprintf("f-%d", j)]; ok {
				resumed = at.Sub(cut)
			}
		}
		mu.Unlock()
		if time.Since(cut) > partition {
			break
		}
	}
	if resumed == 0 || resumed > 10*time.Second {
		t.Fatalf("acks of finals sent after the cut resumed after %v; want within 10 s", resumed)
	}
	t.Logf("acks resumed %v after A was cut off from PostgreSQL", resumed.Round(time.Millisecond))
	if code, body := probe(t, aURL); code != http.StatusServiceUnavailable || body != "not ready: store unreachable" {
		t.Errorf("A's /readyz while cut off: %d %q", code, body)
	}
	proxy.set(0, false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n, nf := len(acked), len(failed)
		mu.Unlock()
		if n+nf == i {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d finals acked 30 s after A's link came back", n, i)
		}
		time.Sleep(20 * time.Millisecond) // real processes and a real database
	}
	for id, e := range failed {
		t.Errorf("final %s failed: %v", id, e)
	}
	t.Logf("%d finals over a %v partition of A: %d acked", i, partition, len(acked))
	for j := range i {
		if shown, _ := plat.counts(fmt.Sprintf("f-%d", j)); shown != 1 {
			t.Errorf("final f-%d shown %d times, want 1", j, shown)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, _ := probe(t, aURL)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A not ready 10 s after its link came back")
		}
	}
}

// probe GETs base's /readyz.
func probe(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b [256]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode, string(trimNL(b[:n]))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
