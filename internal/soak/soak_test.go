package soak

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/internal/faultproxy"
	"github.com/xagentkit/imv2/protocol"
)

// The CI run is small; RELIABILITY.md gives the full-size command.
var (
	flagMessages   = flag.Int("soak.messages", 600, "user messages the Connector sends")
	flagReplies    = flag.Int("soak.replies", 60, "user messages xAgent answers with a streamed reply")
	flagDeltas     = flag.Int("soak.deltas", 50, "deltas per streamed reply")
	flagRestarts   = flag.Int("soak.restarts", 4, "Connector restarts on its durable store during the run")
	flagPendingCap = flag.Int("soak.pendingcap", 32, "the Connector's pending cap per channel (backpressure)")
	flagSeed       = flag.Uint64("soak.seed", 1, "seed of the fault proxy")
	flagBudget     = flag.Duration("soak.timeout", 50*time.Second, "bound on the whole run")
	flagDir        = flag.String("soak.dir", "", "directory for the Connector's bolt file (default a test temp dir; a tmpfs such as /dev/shm makes fsync cheap on long runs)")
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stableCodes are the codes a peer may see in an error packet or a rejected
// ack during the soak. Anything else (or an empty code) is a failure.
var stableCodes = map[imv2.Code]bool{
	imv2.CodeDeltaSequenceGap:      true,
	imv2.CodeDeltaSequenceConflict: true,
	imv2.CodeDeltaLimitExceeded:    true,
	imv2.CodeChannelNotOpen:        true,
	imv2.CodeChannelBusy:           true,
	protocol.CodeHelloRequired:     true,
	imv2.CodeInvalidPacket:         true,
	imv2.CodeChannelUnavailable:    true, // a packet racing a restart
	imv2.CodeTargetDeliveryFailed:  true, // a delivery cancelled by a restart: retryable
	imv2.CodeClosed:                true,
}

// replyText is the final text of the reply to userID: the concatenation of
// its deltas, so every draft must be a prefix of it.
func replyText(userID string, deltas int) string {
	var b strings.Builder
	for i := 1; i <= deltas; i++ {
		b.WriteString(piece(userID, i))
	}
	return b.String()
}

func piece(userID string, i int) string { return fmt.Sprintf("%s·%02d ", userID, i) }

// recorder collects invariant violations (the first few are kept).
type recorder struct {
	mu  sync.Mutex
	n   int
	bad []string
}

func (r *recorder) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if len(r.bad) < 20 {
		r.bad = append(r.bad, fmt.Sprintf(format, args...))
	}
}

// platform is the Connector's IM platform. It counts every side effect:
// PostMessage per final message_id and every draft shown, and checks that
// drafts only grow as prefixes of the final and never follow it (M11, D8).
type platform struct {
	rec    *recorder
	deltas int

	mu        sync.Mutex
	posts     map[string]int
	lastDraft map[string]string
	drafts    int
}

func (p *platform) expect(id string) (string, bool) {
	user, ok := strings.CutPrefix(id, "r-")
	if !ok {
		return "", false
	}
	return replyText(user, p.deltas), true
}

func (p *platform) PostMessage(ctx context.Context, _ string, m *imv2.ChatMessage) error {
	if err := ctx.Err(); err != nil {
		return imv2.NotPosted(err) // a platform call on a cancelled context fails, not applied (the error contract)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts[m.MessageID]++
	if want, ok := p.expect(m.MessageID); !ok || want != m.Text {
		p.rec.violate("final %s posted with unexpected text", m.MessageID)
	}
	return nil
}

func (p *platform) UpdateDraft(_ context.Context, _, id, text string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drafts++
	want, ok := p.expect(id)
	last := p.lastDraft[id]
	switch {
	case !ok:
		p.rec.violate("draft for unknown message %s", id)
	case p.posts[id] > 0:
		p.rec.violate("draft of %s after its final (M11)", id)
	case !strings.HasPrefix(want, text):
		p.rec.violate("draft of %s is not a prefix of its final: %q", id, text)
	case len(text) <= len(last) || !strings.HasPrefix(text, last):
		p.rec.violate("draft of %s out of order: %q after %q", id, text, last)
	}
	p.lastDraft[id] = text
	return nil
}

// agent is xAgent: it counts user messages per message_id and answers
// those marked "reply" with a streamed reply of deltas and a final.
type agent struct {
	rec    *recorder
	deltas int
	client atomic.Pointer[dataplane.Client]
	ctx    context.Context
	wg     sync.WaitGroup

	mu    sync.Mutex
	users map[string]int

	deltasSent, deltasUnsent, finalWaits atomic.Int64
}

func (a *agent) PostMessage(_ context.Context, channelID string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	a.users[m.MessageID]++
	first := a.users[m.MessageID] == 1
	a.mu.Unlock()
	if first && strings.HasPrefix(m.Text, "reply ") {
		a.wg.Add(1)
		go a.reply(channelID, m.MessageID)
	}
	return nil
}

func (a *agent) reply(channelID, userID string) {
	defer a.wg.Done()
	r, err := a.client.Load().NewReply(channelID, "r-"+userID)
	if err != nil {
		a.rec.violate("xAgent channel %s vanished: %v", channelID, err)
		return
	}
	for i := 1; i <= a.deltas; i++ {
		if err := r.Delta(a.ctx, piece(userID, i)); err != nil {
			a.deltasUnsent.Add(1) // best effort: disconnected or cut (D5)
		} else {
			a.deltasSent.Add(1)
		}
	}
	for {
		_, err := r.Final(a.ctx, imv2.ChatMessage{Text: replyText(userID, a.deltas)})
		if err == nil || a.ctx.Err() != nil {
			return
		}
		if !errors.Is(err, &imv2.Error{Code: imv2.CodePendingFull}) {
			a.rec.violate("final r-%s refused: %v", userID, err)
			return
		}
		a.finalWaits.Add(1) // backpressure: wait and try again
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// tally is an Observer and the OnDelivered/OnFailed hooks of one side.
type tally struct {
	mu        sync.Mutex
	delivered map[string]bool
	failed    []string
	codes     map[imv2.Code]int // rejections sent and error packets received
	events    map[imv2.EventKind]int
}

func newTally() *tally {
	return &tally{delivered: map[string]bool{}, codes: map[imv2.Code]int{}, events: map[imv2.EventKind]int{}}
}

func (t *tally) Observe(e imv2.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events[e.Kind]++
	switch e.Kind {
	case imv2.EventRejected, imv2.EventDeltaRejected, imv2.EventPeerError:
		t.codes[e.Code]++
	}
}

func (t *tally) onDelivered(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.delivered[m.MessageID] = true
}

func (t *tally) onFailed(_ string, m imv2.ChatMessage, err *imv2.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = append(t.failed, m.MessageID+": "+string(err.Code))
}

func (t *tally) count(k imv2.EventKind) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events[k]
}

// connector is the Connector process: a dataplane.Server on a boltstore,
// served on a fixed loopback address so the proxy finds it again after a
// restart.
type connector struct {
	addr, path string
	pendingCap int
	plat       *platform
	opts       imv2.Options

	mu       sync.Mutex
	store    *boltstore.Store
	srv      *dataplane.Server
	hs       *http.Server
	served   chan struct{}
	peakPend int
	peakDone int
}

func (c *connector) start() error {
	st, err := boltstore.Open(c.path, boltstore.Options{PendingCap: c.pendingCap})
	if err != nil {
		return err
	}
	opts := c.opts
	opts.Pending, opts.Completed = st.Pending(), st.Completed()
	srv, err := dataplane.NewServer(dataplane.ServerConfig{
		Card:      consolebridge.Card(),
		NewTarget: func(string) imv2.Target { return c.plat },
		Describe: func(context.Context, string) dataplane.ChannelInfo {
			return dataplane.ChannelInfo{Status: protocol.StatusConnected}
		},
		Options:  &opts,
		Registry: st,
		Logger:   opts.Logger,
	})
	if err != nil {
		st.Close()
		return err
	}
	var ln net.Listener
	for range 100 { // the old socket may linger for a moment
		if ln, err = net.Listen("tcp", c.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		srv.Close()
		st.Close()
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	c.mu.Lock()
	c.store, c.srv, c.hs, c.served = st, srv, hs, served
	c.mu.Unlock()
	return nil
}

// stop is a restart's first half: the listener, every connection and
// Channel, then the store. Pending and completed state stay in the file.
func (c *connector) stop() {
	c.mu.Lock()
	st, srv, hs, served := c.store, c.srv, c.hs, c.served
	c.store, c.srv, c.hs = nil, nil, nil
	c.mu.Unlock()
	if hs == nil {
		return
	}
	_ = hs.Close()
	<-served
	_ = srv.Close()
	_ = st.Close()
}

func (c *connector) channel(id string) *imv2.Channel {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		return nil
	}
	return c.srv.Channel(id)
}

// stats reads the store's counts and keeps their peaks.
func (c *connector) stats(ctx context.Context) (boltstore.Stats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store == nil {
		return boltstore.Stats{}, false
	}
	s, err := c.store.Stats(ctx)
	if err != nil {
		return s, false
	}
	c.peakPend = max(c.peakPend, s.Pending)
	c.peakDone = max(c.peakDone, s.Completed)
	return s, true
}

// TestSoak runs user messages and streamed replies between a Connector and
// xAgent through the fault proxy, restarting the Connector on its durable
// store, and checks at the end: no message lost, no side effect twice,
// every draft in order (or its delta rejected with a stable code), every
// store within its cap, and every goroutine gone.
func TestSoak(t *testing.T) {
	n, nReplies, nDeltas := *flagMessages, *flagReplies, *flagDeltas
	if nReplies > n {
		nReplies = n
	}
	stride := 1
	if nReplies > 0 {
		stride = n / nReplies
	}
	wantReply := func(i int) bool { return nReplies > 0 && i%stride == 0 && i/stride < nReplies }
	goroutines := runtime.NumGoroutine()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *flagBudget)
	defer cancel()

	var peakHeap, peakXPending atomic.Uint64
	var xPendingLen atomic.Pointer[func() int] // set once the xAgent channel is open
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	rec := &recorder{}
	logs := &ring{}
	logOpts := &slog.HandlerOptions{Level: slog.LevelInfo}
	cLog := slog.New(slog.NewTextHandler(logs, logOpts)).With("side", "connector")
	xLog := slog.New(slog.NewTextHandler(logs, logOpts)).With("side", "xagent")
	plat := &platform{rec: rec, deltas: nDeltas, posts: map[string]int{}, lastDraft: map[string]string{}}
	cside, xside := newTally(), newTally()
	conn := &connector{
		path: filepath.Join(storeDir(t), "connector.db"), pendingCap: *flagPendingCap, plat: plat,
		opts: imv2.Options{
			AckTimeout: time.Second, RetryMin: 100 * time.Millisecond, RetryMax: time.Second,
			Observer: cside, OnDelivered: cside.onDelivered, OnFailed: cside.onFailed,
			Logger: cLog,
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conn.addr = ln.Addr().String()
	ln.Close()
	if err := conn.start(); err != nil {
		t.Fatal(err)
	}
	go func() { // peak heap and store sizes
		defer close(sampleDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			conn.stats(ctx)
			if f := xPendingLen.Load(); f != nil && uint64((*f)()) > peakXPending.Load() {
				peakXPending.Store(uint64((*f)()))
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	faults := faultproxy.Faults{Drop: 0.02, Duplicate: 0.02, Delay: 0.05, MaxDelay: 20 * time.Millisecond, Cut: 0.003, Seed: *flagSeed}
	proxy := faultproxy.New("ws://"+conn.addr+"/ws", faultproxy.Faults{Seed: *flagSeed})
	// The proxy carries the data plane; the Card the client fetches first
	// is served beside it, as the Connector serves it.
	pmux := http.NewServeMux()
	pmux.HandleFunc("GET /connector-card.json", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(consolebridge.Card())
	})
	pmux.Handle("/ws", proxy)
	ps := httptest.NewServer(pmux)

	actx, acancel := context.WithCancel(context.Background())
	ag := &agent{rec: rec, deltas: nDeltas, ctx: actx, users: map[string]int{}}
	xPending := imv2.NewMemoryPendingStore(0)
	xCompleted := imv2.NewMemoryCompletedStore(0, 0, nil)
	client, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL:    ps.URL,
		Target: ag,
		Options: &imv2.Options{
			AckTimeout: time.Second, RetryMin: 100 * time.Millisecond, RetryMax: time.Second,
			Pending: xPending, Completed: xCompleted,
			Observer: xside, OnDelivered: xside.onDelivered, OnFailed: xside.onFailed,
		},

		Logger:   xLog,
		Advanced: dataplane.ClientAdvanced{CardID: consolebridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 300 * time.Millisecond, RequestTimeout: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	ag.client.Store(client)
	ch, err := client.OpenChannel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	chID := ch
	xLen := func() int { l, _ := xPending.List(ctx, chID); return len(l) }
	xPendingLen.Store(&xLen)
	proxy.SetFaults(faults)

	// The Connector's sender: user messages with stable IDs, retried on
	// backpressure (pending_full) and across restarts (closed, not open).
	var backpressure, restarts, halfOpens int
	restartEvery := n / (*flagRestarts + 1)
	var halfOpenWG sync.WaitGroup
	var sentCount atomic.Int64
	progress := time.NewTicker(30 * time.Second) // long runs say how far they got
	defer progress.Stop()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case <-progress.C:
			ag.mu.Lock()
			got := len(ag.users)
			ag.mu.Unlock()
			plat.mu.Lock()
			posted := len(plat.posts)
			plat.mu.Unlock()
			t.Logf("progress %v: sent %d/%d, received %d, finals posted %d, restarts %d",
				time.Since(began).Round(time.Second), sentCount.Load(), n, got, posted, restarts)
		default:
		}
		if *flagRestarts > 0 && i > 0 && i%restartEvery == 0 && restarts < *flagRestarts {
			conn.stop()
			time.Sleep(50 * time.Millisecond) // the proxy's dials fail meanwhile
			if err := conn.start(); err != nil {
				t.Fatalf("restart %d: %v", restarts+1, err)
			}
			restarts++
		}
		switch i {
		case n / 4: // hold every connection half-open for a while
			halfOpens++
			proxy.HalfOpen(true)
			halfOpenWG.Add(1)
			time.AfterFunc(300*time.Millisecond, func() { proxy.HalfOpen(false); halfOpenWG.Done() })
		case 3 * n / 4:
			proxy.CutAll()
		}
		id := fmt.Sprintf("u-%05d", i)
		kind := "note "
		if wantReply(i) {
			kind = "reply "
		}
		m := imv2.ChatMessage{MessageID: id, Text: kind + id}
		for ctx.Err() == nil {
			if c := conn.channel(chID); c != nil {
				_, err := c.Send(ctx, m)
				if err == nil {
					sentCount.Add(1)
					break
				}
				var e *imv2.Error
				if !errors.As(err, &e) || (e.Code != imv2.CodePendingFull && e.Code != imv2.CodeClosed) {
					t.Fatalf("send %s: %v", id, err)
				}
				if e.Code == imv2.CodePendingFull {
					backpressure++
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	halfOpenWG.Wait()

	// Calm phase: no more faults, fresh connections, then wait for
	// everything to settle.
	proxy.SetFaults(faultproxy.Faults{})
	proxy.CutAll()
	settled := func() bool {
		ag.mu.Lock()
		users := len(ag.users)
		ag.mu.Unlock()
		plat.mu.Lock()
		finals := len(plat.posts)
		plat.mu.Unlock()
		cside.mu.Lock()
		cDelivered := len(cside.delivered)
		cside.mu.Unlock()
		xside.mu.Lock()
		xDelivered := len(xside.delivered)
		xside.mu.Unlock()
		s, ok := conn.stats(ctx)
		return users == n && finals == nReplies && cDelivered == n && xDelivered == nReplies &&
			ok && s.Pending == 0 && xLen() == 0
	}
	for !settled() && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(began)
	final, _ := conn.stats(context.Background())
	pst := proxy.Stats()

	// Shut everything down before judging, so a failure leaks nothing.
	acancel()
	_ = client.Close()
	ag.wg.Wait()
	proxy.Close()
	ps.Close()
	conn.stop()
	close(stopSampling)
	<-sampleDone

	// Figures.
	lostUsers, dupUsers := 0, 0
	for i := range n {
		switch c := ag.users[fmt.Sprintf("u-%05d", i)]; {
		case c == 0:
			lostUsers++
		case c > 1:
			dupUsers += c - 1
		}
	}
	lostFinals, dupFinals := 0, 0
	for i := range n {
		if !wantReply(i) {
			continue
		}
		switch c := plat.posts[fmt.Sprintf("r-u-%05d", i)]; {
		case c == 0:
			lostFinals++
		case c > 1:
			dupFinals += c - 1
		}
	}
	codes := map[imv2.Code]int{}
	for _, tl := range []*tally{cside, xside} {
		for c, k := range tl.codes {
			codes[c] += k
		}
	}
	t.Logf("soak: %d user messages, %d replies of %d deltas, %d restarts, %d half-open, seed %d, %v",
		n, nReplies, nDeltas, restarts, halfOpens, *flagSeed, elapsed.Round(time.Millisecond))
	t.Logf("faults: conns %d frames %d dropped %d duplicated %d delayed %d cuts %d",
		pst.Conns, pst.Frames, pst.Dropped, pst.Duplicated, pst.Delayed, pst.Cuts)
	t.Logf("deltas: sent %d, not sent (disconnected) %d, drafts shown %d, rejected/error codes %s",
		ag.deltasSent.Load(), ag.deltasUnsent.Load(), plat.drafts, fmtCodes(codes))
	t.Logf("delivery: resends %d+%d, duplicates answered %d+%d, backpressure waits %d+%d",
		cside.count(imv2.EventRetry), xside.count(imv2.EventRetry),
		xside.count(imv2.EventDuplicate), cside.count(imv2.EventDuplicate), backpressure, ag.finalWaits.Load())
	t.Logf("result: lost %d+%d, duplicated side effects %d+%d, failed %d+%d, violations %d",
		lostUsers, lostFinals, dupUsers, dupFinals, len(cside.failed), len(xside.failed), rec.n)
	t.Logf("stores: connector pending peak %d (cap %d), completed peak %d (cap %d); xAgent pending peak %d (cap %d), completed %d (cap %d); peak heap %.1f MiB",
		conn.peakPend, *flagPendingCap, conn.peakDone, imv2.DefaultCompletedCap,
		peakXPending.Load(), imv2.DefaultPendingCap, xCompleted.(interface{ Len() int }).Len(), imv2.DefaultCompletedCap, float64(peakHeap.Load())/(1<<20))

	if ctx.Err() != nil {
		t.Errorf("did not settle within %v: users %d/%d, finals %d/%d, connector pending %d",
			*flagBudget, len(ag.users), n, len(plat.posts), nReplies, final.Pending)
	}
	if lostUsers+lostFinals > 0 {
		t.Errorf("lost: %d user messages, %d finals", lostUsers, lostFinals)
	}
	if dupUsers+dupFinals > 0 {
		t.Errorf("side effects run twice: %d user messages, %d finals", dupUsers, dupFinals)
	}
	if len(cside.failed)+len(xside.failed) > 0 {
		t.Errorf("messages failed: connector %v, xAgent %v", cside.failed, xside.failed)
	}
	for _, b := range rec.bad {
		t.Errorf("violation: %s", b)
	}
	for c := range codes {
		if !stableCodes[c] {
			t.Errorf("code %q seen in a rejection or error packet is not a stable delta/transport code", c)
		}
	}
	if conn.peakPend > *flagPendingCap || conn.peakDone > imv2.DefaultCompletedCap ||
		peakXPending.Load() > imv2.DefaultPendingCap || xCompleted.(interface{ Len() int }).Len() > imv2.DefaultCompletedCap {
		t.Errorf("a store passed its cap")
	}
	if final.Pending != 0 || xPending.(interface{ Len(string) int }).Len(chID) != 0 {
		t.Errorf("pending left after quiescence: connector %d, xAgent %d", final.Pending, xPending.(interface{ Len(string) int }).Len(chID))
	}
	if restarts != *flagRestarts {
		t.Errorf("ran %d restarts, want %d", restarts, *flagRestarts)
	}
	if t.Failed() {
		t.Logf("last log lines of both sides:\n%s", logs)
	}
	settleGoroutines(t, goroutines)
}

// ring keeps the last lines of both sides' logs, shown when the soak fails.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
}

func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	const keep = 300
	if len(r.lines) < keep {
		r.lines = append(r.lines, string(b))
	} else {
		r.lines[r.next] = string(b)
		r.next = (r.next + 1) % keep
	}
	return len(b), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(append(slices.Clone(r.lines[r.next:]), r.lines[:r.next]...), "")
}

// storeDir is -soak.dir (a fresh directory under it) or a test temp dir.
func storeDir(t *testing.T) string {
	if *flagDir == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(*flagDir, "soak")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func fmtCodes(m map[imv2.Code]int) string {
	keys := make([]string, 0, len(m))
	for c := range m {
		keys = append(keys, string(c))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[imv2.Code(k)]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// settleGoroutines waits for the goroutine count to come back to where the
// test started (timers and closing sockets take a moment).
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
