package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/metrics"
)

// armedStore fails the next Lookup once armed, as a database that drops
// a connection would.
type armedStore struct {
	imv2.CompletedStore
	fail atomic.Bool
}

func (s *armedStore) Lookup(ctx context.Context, ch, id string) (imv2.Fingerprint, bool, error) {
	if s.fail.CompareAndSwap(true, false) {
		return imv2.Fingerprint{}, false, errors.New("connection reset")
	}
	return s.CompletedStore.Lookup(ctx, ch, id)
}

// TestCollector_ConversationScrapedOverHTTP runs an xAgent and a Connector
// Channel over the in-memory transports, each observed by its own
// Collector, through every outcome the metrics count, and scrapes both
// handlers over HTTP.
func TestCollector_ConversationScrapedOverHTTP(t *testing.T) {
	ctx := context.Background()
	mx, mc := metrics.New(), metrics.New()
	// The two events the Channels observe on their own goroutines after
	// the call that caused them, each signalled once its Collector has it.
	ox := newSignal(mx, imv2.EventAckUnmatched)
	oc := newSignal(mc, imv2.EventDeltaRejected)
	// The Connector's clock is fake: the Target moves it 250ms per call,
	// so the latency histogram has exact values.
	clock := fakeclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	store := &armedStore{CompletedStore: imv2.NewMemoryCompletedStore(0, 0, clock)}
	entered, release := make(chan struct{}), make(chan struct{})
	var flaky atomic.Int32
	target := imv2.TargetFunc(func(_ context.Context, _ string, m *imv2.ChatMessage) error {
		clock.Advance(250 * time.Millisecond)
		switch m.Text {
		case "flaky":
			if flaky.Add(1) == 1 {
				return imv2.NotPosted(errors.New("platform busy")) // retryable
			}
		case "refuse":
			return imv2.Refused(errors.New("platform refuses"))
		case "slow":
			close(entered)
			<-release
		}
		return nil
	})

	delivered := make(chan imv2.AckStatus, 8)
	failed := make(chan imv2.Code, 8)
	neg := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	a, b := imv2test.NewInMemoryTransports()
	conn, err := imv2.NewChannel("cch_1", imv2.RoleConnector, neg, a, target,
		&imv2.Options{Observer: oc, Clock: clock, Completed: mc.Completed(store), Pending: mc.Pending(imv2.NewMemoryPendingStore(0))})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := imv2.NewChannel("cch_1", imv2.RoleXAgent, neg, b,
		imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }),
		&imv2.Options{
			Observer: ox, RetryMin: 2 * time.Millisecond, RetryMax: 4 * time.Millisecond, AckTimeout: time.Minute,
			OnDelivered: func(_ string, _ imv2.ChatMessage, s imv2.AckStatus) { delivered <- s },
			OnFailed:    func(_ string, _ imv2.ChatMessage, e *imv2.Error) { failed <- e.Code },
		})
	if err != nil {
		t.Fatal(err)
	}
	a.Attach(conn)
	b.Attach(agent)
	defer func() {
		_ = agent.Close()
		_ = conn.Close()
		_ = a.Close()
	}()
	sx := httptest.NewServer(mx.Handler())
	defer sx.Close()
	sc := httptest.NewServer(mc.Handler())
	defer sc.Close()
	defer http.DefaultClient.CloseIdleConnections()

	final := func(text string) string {
		t.Helper()
		r := agent.NewReply("")
		if err := r.Final(ctx, imv2.ChatMessage{Text: text}); err != nil {
			t.Fatalf("Final(%s): %v", text, err)
		}
		return r.MessageID()
	}
	wantDelivered := func() {
		t.Helper()
		select {
		case s := <-delivered:
			if s != imv2.AckAccepted {
				t.Fatalf("delivered %s, want accepted", s)
			}
		case c := <-failed:
			t.Fatalf("failed with %s, want delivered", c)
		case <-time.After(20 * time.Second):
			t.Fatal("no outcome")
		}
	}

	firstID := final("ok")
	wantDelivered()
	final("flaky") // rejected retryable once, resent, accepted
	wantDelivered()
	final("refuse")
	select {
	case c := <-failed:
		if c != imv2.CodeTargetRejected {
			t.Fatalf("failed with %s, want %s", c, imv2.CodeTargetRejected)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no outcome")
	}
	store.fail.Store(true) // the next Lookup fails: rejected retryable, resent, accepted
	final("store")
	wantDelivered()

	// While the Target holds one message, it is pending on the sender.
	final("slow")
	<-entered
	if got := scrape(t, sx.URL)["imv2_pending_messages"]; got != 1 {
		t.Fatalf("imv2_pending_messages = %v while one message awaits its ack, want 1", got)
	}
	close(release)
	wantDelivered()

	// A resend of a completed message is answered duplicate; a delta out
	// of sequence is rejected.
	dup, err := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{MessageID: firstID, Text: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Receive(ctx, dup); err != nil {
		t.Fatal(err)
	}
	gap, err := imv2.NewChatMessageDelta("cch_1", imv2.ChatMessageDelta{MessageID: "msg_gap", Sequence: 5, Text: "late"})
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Receive(ctx, gap) // the rejection is the point
	ox.wait(t, imv2.EventAckUnmatched)
	oc.wait(t, imv2.EventDeltaRejected)
	if got := scrape(t, sx.URL)[`imv2_events_total{kind="ack_unmatched"}`]; got != 1 {
		t.Errorf("imv2_events_total{kind=\"ack_unmatched\"} = %v after the ack of the duplicate, want 1", got)
	}

	// The sender: five messages, two resends, four accepted, one failed.
	if err := testutil.ScrapeAndCompare(sx.URL, strings.NewReader(`
# HELP imv2_messages_sent_total Outbound messages transmitted for the first time.
# TYPE imv2_messages_sent_total counter
imv2_messages_sent_total 5
# HELP imv2_resends_total Transmissions of outbound messages after the first.
# TYPE imv2_resends_total counter
imv2_resends_total 2
# HELP imv2_pending_messages Outbound messages transmitted and not yet acked or failed.
# TYPE imv2_pending_messages gauge
imv2_pending_messages 0
# HELP imv2_acks_received_total Terminal outcomes of outbound messages, by ack status and code.
# TYPE imv2_acks_received_total counter
imv2_acks_received_total{code="",status="accepted"} 4
imv2_acks_received_total{code="target_rejected",status="rejected"} 1
`), "imv2_messages_sent_total", "imv2_resends_total", "imv2_pending_messages", "imv2_acks_received_total"); err != nil {
		t.Error(err)
	}
	// The receiver: what it answered, the Target's latency (four
	// successful calls of exactly 250ms), the store error, the delta.
	if err := testutil.ScrapeAndCompare(sc.URL, strings.NewReader(`
# HELP imv2_acks_sent_total Acks answering inbound messages, by status and code.
# TYPE imv2_acks_sent_total counter
imv2_acks_sent_total{code="",status="accepted"} 4
imv2_acks_sent_total{code="",status="duplicate"} 1
imv2_acks_sent_total{code="target_delivery_failed",status="rejected"} 2
imv2_acks_sent_total{code="target_rejected",status="rejected"} 1
# HELP imv2_store_errors_total Errors of the pending and completed stores, by store and operation.
# TYPE imv2_store_errors_total counter
imv2_store_errors_total{op="lookup",store="completed"} 1
# HELP imv2_deltas_rejected_total Deltas rejected with an error packet, by code.
# TYPE imv2_deltas_rejected_total counter
imv2_deltas_rejected_total{code="delta_sequence_gap"} 1
# HELP imv2_target_call_duration_seconds Duration of the Target's PostMessage calls, by outcome (ok, error).
# TYPE imv2_target_call_duration_seconds histogram
imv2_target_call_duration_seconds_bucket{outcome="error",le="0.005"} 0
imv2_target_call_duration_seconds_bucket{outcome="error",le="0.01"} 0
imv2_target_call_duration_seconds_bucket{outcome="error",le="0.025"} 0
imv2_target_call_duration_seconds_bucket{outcome="error",le="0.05"} 0
imv2_target_call_duration_seconds_bucket{outcome="error",le="0.1"} 0
imv2_target_call_duration_seconds_bucket{outcome="error",le="0.25"} 2
imv2_target_call_duration_seconds_bucket{outcome="error",le="0.5"} 2
imv2_target_call_duration_seconds_bucket{outcome="error",le="1"} 2
imv2_target_call_duration_seconds_bucket{outcome="error",le="2.5"} 2
imv2_target_call_duration_seconds_bucket{outcome="error",le="5"} 2
imv2_target_call_duration_seconds_bucket{outcome="error",le="10"} 2
imv2_target_call_duration_seconds_bucket{outcome="error",le="30"} 2
imv2_target_call_duration_seconds_bucket{outcome="error",le="+Inf"} 2
imv2_target_call_duration_seconds_sum{outcome="error"} 0.5
imv2_target_call_duration_seconds_count{outcome="error"} 2
imv2_target_call_duration_seconds_bucket{outcome="ok",le="0.005"} 0
imv2_target_call_duration_seconds_bucket{outcome="ok",le="0.01"} 0
imv2_target_call_duration_seconds_bucket{outcome="ok",le="0.025"} 0
imv2_target_call_duration_seconds_bucket{outcome="ok",le="0.05"} 0
imv2_target_call_duration_seconds_bucket{outcome="ok",le="0.1"} 0
imv2_target_call_duration_seconds_bucket{outcome="ok",le="0.25"} 4
imv2_target_call_duration_seconds_bucket{outcome="ok",le="0.5"} 4
imv2_target_call_duration_seconds_bucket{outcome="ok",le="1"} 4
imv2_target_call_duration_seconds_bucket{outcome="ok",le="2.5"} 4
imv2_target_call_duration_seconds_bucket{outcome="ok",le="5"} 4
imv2_target_call_duration_seconds_bucket{outcome="ok",le="10"} 4
imv2_target_call_duration_seconds_bucket{outcome="ok",le="30"} 4
imv2_target_call_duration_seconds_bucket{outcome="ok",le="+Inf"} 4
imv2_target_call_duration_seconds_sum{outcome="ok"} 1
imv2_target_call_duration_seconds_count{outcome="ok"} 4
`), "imv2_acks_sent_total", "imv2_store_errors_total", "imv2_deltas_rejected_total", "imv2_target_call_duration_seconds"); err != nil {
		t.Error(err)
	}
}

// scrape GETs url and returns each sample by its name and labels as
// written (labels sorted by the client library).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// signal is an Observer that hands every event to its Collector and
// then, the first time an event of one of its kinds arrives, closes that
// kind's channel: once it is closed the Collector has counted the event,
// so a scrape sees it, with no polling.
type signal struct {
	next imv2.Observer
	seen map[imv2.EventKind]chan struct{} // fixed at construction
	once map[imv2.EventKind]*sync.Once
}

func newSignal(next imv2.Observer, kinds ...imv2.EventKind) *signal {
	s := &signal{next: next, seen: map[imv2.EventKind]chan struct{}{}, once: map[imv2.EventKind]*sync.Once{}}
	for _, k := range kinds {
		s.seen[k], s.once[k] = make(chan struct{}), new(sync.Once)
	}
	return s
}

func (s *signal) Observe(e imv2.Event) {
	s.next.Observe(e)
	if ch, ok := s.seen[e.Kind]; ok {
		s.once[e.Kind].Do(func() { close(ch) })
	}
}

// wait returns once an event of kind was observed. The bound only keeps
// a broken build from hanging the test run.
func (s *signal) wait(t *testing.T, kind imv2.EventKind) {
	t.Helper()
	select {
	case <-s.seen[kind]:
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s event", kind)
	}
}
