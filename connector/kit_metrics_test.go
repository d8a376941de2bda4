package connector_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/cmdtest"
	"github.com/xagentkit/imv2/internal/promtext"
	"github.com/xagentkit/imv2/internal/testwait"
	"github.com/xagentkit/imv2/state"
)

const scrapeKey = "metrics-key-for-tests-0123456789"

// recordFails fails the next completed Record once armed, as a database
// that drops a connection would.
type recordFails struct {
	state.Store
	armed atomic.Bool
}

func (s *recordFails) Record(ctx context.Context, ch, id string, fp imv2.Fingerprint) error {
	if s.armed.CompareAndSwap(true, false) {
		return errors.New("connection reset")
	}
	return s.Store.Record(ctx, ch, id, fp)
}

// meterPlatform's reader hands xAgent one user message, then fails once
// (the kit restarts it after a second) and then reads until stopped.
type meterPlatform struct {
	*pretend
	calls atomic.Int32
	again chan struct{}
}

func (p *meterPlatform) Listen(ctx context.Context, b state.Binding, in connector.Inbox) error {
	switch p.calls.Add(1) {
	case 1:
		if err := in.Receive(ctx, connector.InboundEvent{Conversation: b.Key, EventID: "ev-1", Text: "hello"}); err != nil {
			return err
		}
		return errors.New("room reader: connection refused")
	case 2:
		close(p.again)
	}
	<-ctx.Done()
	return nil
}

// scrapeMetrics GETs /metrics with key and parses it strictly.
func scrapeMetrics(t *testing.T, url, key string) (map[string]float64, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, promtext.ContentType, resp.Header.Get("Content-Type"))
	series, err := promtext.Parse(body)
	require.NoError(t, err, string(body))
	return series, string(body)
}

// observed signals each event of kind on a channel.
func observed(kind imv2.EventKind, ch chan<- imv2.Event) imv2.Observer {
	return imv2.ObserverFunc(func(e imv2.Event) {
		if e.Kind == kind {
			ch <- e
		}
	})
}

// TestKit_Metrics_ServedByDefaultBehindTheKey: a kit Connector with no
// metrics option serves /metrics behind its metrics token (here set to the
// API key: 401 without it), in
// the text format, with the Observer series of the metrics module and the
// kit's own: a store error counted through Options.Store, the open
// connection and channel, the send→ack latency of a user message, a
// listener failure, build_info and the Go and process series.
func TestKit_Metrics_ServedByDefaultBehindTheKey(t *testing.T) {
	st := &recordFails{Store: connector.NewMemoryStore(nil)}
	p := &meterPlatform{pretend: newPretend(0), again: make(chan struct{})}
	acked := make(chan imv2.Event, 4)
	_, url := startKit(t, p, scrapeKey, connector.Options{Store: st, Advanced: connector.Advanced{
		Channel:      &imv2.Options{Observer: observed(imv2.EventAcked, acked)},
		MetricsToken: scrapeKey, // one credential for both, configured so
	}})

	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "/metrics needs its token")

	users := make(chan imv2.ChatMessage, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	delivered := make(chan imv2.AckStatus, 4)
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, APIKey: scrapeKey, Target: inbound(users),
		Options: &imv2.Options{OnDelivered: func(_ string, _ imv2.ChatMessage, s imv2.AckStatus) { delivered <- s }}})
	require.NoError(t, err)
	defer cli.Close()
	ch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	require.Equal(t, "hello", testwait.Recv(t, users, 10*time.Second).Text)
	testwait.Recv(t, acked, 10*time.Second) // the user message's ack reached the kit
	st.armed.Store(true)
	require.NoError(t, final(ctx, newReply(t, cli, ch), imv2.ChatMessage{Text: "a final"})) // its Record fails, logged
	require.Equal(t, imv2.AckAccepted, testwait.Recv(t, delivered, 10*time.Second))
	testwait.Recv(t, p.again, 10*time.Second) // the reader failed once and was restarted

	cmdtest.CheckMetrics(t, url, scrapeKey) // every family, strictly parsed
	s, body := scrapeMetrics(t, url, scrapeKey)
	for k, want := range map[string]float64{
		`imv2_store_errors_total{store="completed",op="record"}`:           1,
		`imv2_open_connections`:                                            1,
		`imv2_open_channels`:                                               1,
		`imv2_ack_latency_seconds_count`:                                   1,
		`imv2_listener_failures_total`:                                     1,
		`imv2_messages_sent_total`:                                         1,
		`imv2_resends_total`:                                               0,
		`imv2_pending_messages`:                                            0,
		`imv2_waiting_messages`:                                            0,
		`imv2_events_total{kind="sent"}`:                                   1,
		`imv2_acks_received_total{status="accepted",code=""}`:              1,
		`imv2_acks_sent_total{status="accepted",code=""}`:                  1,
		`imv2_target_call_duration_seconds_count{outcome="ok"}`:            1,
		`imv2_target_call_duration_seconds_bucket{outcome="ok",le="+Inf"}`: 1,
	} {
		v, ok := s[k]
		require.True(t, ok, "no series %s in:\n%s", k, body)
		require.Equal(t, want, v, k)
	}
	require.Contains(t, body, "# TYPE imv2_deltas_rejected_total counter\n")
	require.Contains(t, body, "# TYPE imv2_ack_latency_seconds histogram\n")
	for _, k := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"} {
		require.Greater(t, s[k], 0.0, k)
	}
	require.Contains(t, s, "go_gc_duration_seconds_count")
	build := false
	for k, v := range s {
		build = build || (strings.HasPrefix(k, "imv2_build_info{") && strings.Contains(k, `goversion="go`) && v == 1)
	}
	require.True(t, build, "imv2_build_info:\n%s", body)
}

// TestKit_Metrics_PendingCountsTheSendWindowsQueue: user messages past
// the send window (MaxUnacked) are pending too: imv2_pending_messages
// counts them with those transmitted, and imv2_waiting_messages those
// not yet transmitted; both fall to 0 once xAgent acks.
func TestKit_Metrics_PendingCountsTheSendWindowsQueue(t *testing.T) {
	acked := make(chan imv2.Event, 4)
	k, url := startKit(t, newPretend(0), scrapeKey, connector.Options{Advanced: connector.Advanced{
		Channel:      &imv2.Options{MaxUnacked: 1, Observer: observed(imv2.EventAcked, acked)},
		MetricsToken: scrapeKey,
	}})
	hold, entered := make(chan struct{}), make(chan string, 8)
	var holding atomic.Bool
	holding.Store(true)
	agent := imv2.TargetFunc(func(ctx context.Context, _ string, m *imv2.ChatMessage) error {
		entered <- m.Text
		if holding.Load() {
			<-hold // xAgent holds the first user message's ack
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: url, APIKey: scrapeKey, Target: agent})
	require.NoError(t, err)
	defer cli.Close()
	var once sync.Once
	release := func() { once.Do(func() { holding.Store(false); close(hold) }) }
	defer release() // before Close, which waits for the Target, on a failure too
	ch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	for i, text := range []string{"one", "two", "three"} {
		require.NoError(t, k.Receive(ctx, connector.InboundEvent{Conversation: ch, EventID: "ev-" + text, Text: text}), i)
	}
	require.Equal(t, "one", testwait.Recv(t, entered, 10*time.Second))
	s, _ := scrapeMetrics(t, url, scrapeKey)
	require.Equal(t, 3.0, s["imv2_pending_messages"], "one transmitted, two waiting for the window")
	require.Equal(t, 2.0, s["imv2_waiting_messages"])
	require.Equal(t, 1.0, s["imv2_messages_sent_total"])

	release()
	for range 3 {
		testwait.Recv(t, acked, 10*time.Second) // the kit's metrics saw it first
	}
	s, _ = scrapeMetrics(t, url, scrapeKey)
	require.Equal(t, 0.0, s["imv2_pending_messages"])
	require.Equal(t, 0.0, s["imv2_waiting_messages"])
	require.Equal(t, 3.0, s["imv2_ack_latency_seconds_count"])
}
