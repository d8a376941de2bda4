package dataplane

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/benchcpu"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// Benchmarks of the data plane against raw gorilla/websocket, in the same
// run. scripts/bench.sh runs them with the root package's; BENCHMARKS.md
// has the numbers.

// benchFinal is the assistant final of BenchmarkRoundTripWS (~200 bytes
// of text, a typical short answer).
var benchFinal = imv2.ChatMessage{Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)}

// benchPair is a Server (Connector) and a Client (xAgent) over a loopback
// WebSocket, one channel open.
type benchPair struct {
	srv *Server
	hs  *httptest.Server
	cli *Client
}

func newBenchPair(b *testing.B, maxChannels int, opts *imv2.Options) *benchPair {
	b.Helper()
	noop := imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil })
	srv, err := NewServer(ServerConfig{
		Card:        testCard(),
		NewTarget:   func(string) imv2.Target { return noop },
		MaxChannels: maxChannels,
	})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(withCard(testCard(), srv))
	cli, err := Dial(context.Background(), ClientConfig{
		URL:      hs.URL,
		Target:   noop,
		Options:  opts,
		Store:    state.NewMemoryChannelStore(maxChannels),
		Advanced: ClientAdvanced{MaxChannels: maxChannels},
	})
	if err != nil {
		hs.Close()
		_ = srv.Close()
		b.Fatal(err)
	}
	return &benchPair{srv: srv, hs: hs, cli: cli}
}

func (p *benchPair) close() {
	_ = p.cli.Close()
	_ = p.srv.Close()
	p.hs.Close()
}

// BenchmarkRoundTripWS: assistant finals and their acks over a loopback
// WebSocket with 1 and 64 messages in flight. sdk is the whole SDK on both
// sides (Client and Channel in the xAgent role, Server and Channel in the
// Connector role: validation, pending store, codec, routing, a Target
// call, the completed store, the ack); raw is gorilla/websocket sending
// the same frame bytes and echoing the same ack bytes, with nothing else.
// One op is one message acknowledged.
func BenchmarkRoundTripWS(b *testing.B) {
	for _, inflight := range []int{1, 64} {
		b.Run("sdk-"+strconv.Itoa(inflight), func(b *testing.B) { benchRoundTripSDK(b, inflight) })
		b.Run("raw-"+strconv.Itoa(inflight), func(b *testing.B) { benchRoundTripRaw(b, inflight) })
	}
}

// BenchmarkRoundTripWSOneCore is BenchmarkRoundTripWS with GOMAXPROCS 1
// for its duration: every goroutine of both ends on one core, so the time
// per message is the CPU the path costs, with no core idle while a
// hand-off wakes another (BENCHMARKS.md: on two cores the scheduler runs
// either side's chain on one core at a time, and raw is no faster there).
func BenchmarkRoundTripWSOneCore(b *testing.B) {
	oneCore := func(f func(*testing.B, int), inflight int) func(*testing.B) {
		return func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			f(b, inflight)
		}
	}
	for _, inflight := range []int{1, 64} {
		b.Run("sdk-"+strconv.Itoa(inflight), oneCore(benchRoundTripSDK, inflight))
		b.Run("raw-"+strconv.Itoa(inflight), oneCore(benchRoundTripRaw, inflight))
	}
}

func benchRoundTripSDK(b *testing.B, inflight int) {
	slots := make(chan struct{}, inflight)
	var failed sync.Once
	opts := &imv2.Options{
		OnDelivered: func(string, imv2.ChatMessage, imv2.AckStatus) { <-slots },
		OnFailed: func(_ string, _ imv2.ChatMessage, err *imv2.Error) {
			failed.Do(func() { b.Error("message failed:", err) })
			<-slots
		},
	}
	p := newBenchPair(b, 0, opts)
	defer p.close()
	ctx := context.Background()
	ch, err := p.cli.OpenChannel(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	report := benchcpu.MeasureSyscalls(b)
	for range b.N {
		slots <- struct{}{}
		if _, err := p.cli.engine(ch).Send(ctx, benchFinal); err != nil {
			b.Fatal(err)
		}
	}
	for range inflight { // wait for the last acks
		slots <- struct{}{}
	}
	report()
}

// benchFrames returns the frame of one final and of its accepted ack, as
// the SDK encodes them.
func benchFrames(b *testing.B) (final, ack []byte) {
	b.Helper()
	m := benchFinal
	m.MessageID = imv2.NewMessageID() // the ack names it (NewAck refuses an empty one)
	p, err := imv2.NewChatMessage("cch_"+strings.Repeat("0", 36), imv2.ToConnector, m)
	if err != nil {
		b.Fatal(err)
	}
	a, err := imv2.NewAck(p, m.MessageID, imv2.AckAccepted, nil)
	if err != nil {
		b.Fatal(err)
	}
	if final, err = p.Encode(); err != nil {
		b.Fatal(err)
	}
	if ack, err = a.Encode(); err != nil {
		b.Fatal(err)
	}
	return final, ack
}

// rawEcho is a gorilla/websocket server answering every frame with ack,
// and a client connected to it; stop closes both.
func rawEcho(b *testing.B, ack []byte) (*websocket.Conn, func()) {
	b.Helper()
	up := websocket.Upgrader{Subprotocols: []string{protocol.Subprotocol}}
	var served sync.WaitGroup
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		served.Add(1)
		defer served.Done()
		defer ws.Close()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
			if err := ws.WriteMessage(websocket.TextMessage, ack); err != nil {
				return
			}
		}
	}))
	d := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		hs.Close()
		b.Fatal(err)
	}
	var once sync.Once
	return ws, func() {
		once.Do(func() {
			_ = ws.Close()
			served.Wait()
			hs.Close()
		})
	}
}

func benchRoundTripRaw(b *testing.B, inflight int) {
	final, ack := benchFrames(b)
	ws, stop := rawEcho(b, ack)
	defer stop()
	slots := make(chan struct{}, inflight)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
			<-slots
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	report := benchcpu.MeasureSyscalls(b)
	for range b.N {
		slots <- struct{}{}
		if err := ws.WriteMessage(websocket.TextMessage, final); err != nil {
			b.Fatal(err)
		}
	}
	for range inflight {
		slots <- struct{}{}
	}
	report()
	b.StopTimer()
	stop()
	<-readDone
}

// BenchmarkIdleChannels opens 10,000 and 100,000 channels on one
// data-plane connection and reports the heap they hold, both ends
// together (the Connector's Server and Channels, xAgent's Client and
// Channels, the registry and the stores), per channel. The goal: at most
// 2 KiB at 100,000, and no growth from 10,000.
func BenchmarkIdleChannels(b *testing.B) {
	for _, channels := range []int{10_000, 100_000} {
		b.Run("channels-"+strconv.Itoa(channels), func(b *testing.B) { benchIdleChannels(b, channels) })
	}
}

func benchIdleChannels(b *testing.B, channels int) {
	const openers = 8
	var perChannel float64
	for b.Loop() {
		p := newBenchPair(b, channels, nil)
		before := heapAfterGC()
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, openers)
		for w := range openers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < channels; i += openers {
					if _, err := p.cli.OpenChannel(ctx, ""); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		if got := len(p.srv.ChannelIDs()); got != channels {
			b.Fatalf("%d channels open, want %d", got, channels)
		}
		after := heapAfterGC()
		perChannel = float64(after-before) / float64(channels)
		p.close()
	}
	b.ReportMetric(perChannel, "B/channel")
}

// The offered load of BenchmarkLatencyWS: 5,000 messages a second over
// 100 channels (50 a second each), open loop.
const (
	latencyRate     = 5000
	latencyChannels = 100
)

// BenchmarkLatencyWS: the time from a final's send to its ack at a fixed
// offered load (open loop: message i is sent at i/5,000 s whatever the
// acks do, so a slow ack cannot slow the load down and hide itself),
// reported as percentiles (p50-ns, p99-ns, p99.9-ns). sdk is
// Channel.Send on one of 100 channels of one connection to the
// OnDelivered callback; raw is gorilla/websocket writing the same final
// frame and reading the echoed ack frame. ns/op is the pacing (200 µs).
func BenchmarkLatencyWS(b *testing.B) {
	b.Run("sdk", benchLatencySDK)
	b.Run("raw", benchLatencyRaw)
}

// latencyRecorder collects one latency per message, from the moment its
// send began.
type latencyRecorder struct {
	start time.Time
	sent  []atomic.Int64 // ns since start when message i's send began
	took  []atomic.Int64 // ns from send to ack; 0: not yet
	left  atomic.Int64
	done  chan struct{}
}

func newLatencyRecorder(n int) *latencyRecorder {
	r := &latencyRecorder{sent: make([]atomic.Int64, n), took: make([]atomic.Int64, n), done: make(chan struct{})}
	r.left.Store(int64(n))
	return r
}

// pace waits until message i's turn and records its send time.
func (r *latencyRecorder) pace(i int) {
	due := r.start.Add(time.Duration(i) * time.Second / latencyRate)
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
	r.sent[i].Store(int64(time.Since(r.start)))
}

func (r *latencyRecorder) acked(i int) {
	r.took[i].Store(max(1, int64(time.Since(r.start))-r.sent[i].Load()))
	if r.left.Add(-1) == 0 {
		close(r.done)
	}
}

func (r *latencyRecorder) report(b *testing.B) {
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		b.Fatalf("%d acks missing", r.left.Load())
	}
	lat := make([]int64, len(r.took))
	for i := range r.took {
		lat[i] = r.took[i].Load()
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(0.999), "p99.9-ns")
}

func benchLatencySDK(b *testing.B) {
	var rec atomic.Pointer[latencyRecorder]
	var index sync.Map // message_id → message index
	opts := &imv2.Options{
		OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
			if i, ok := index.Load(m.MessageID); ok {
				rec.Load().acked(i.(int))
			}
		},
		OnFailed: func(_ string, _ imv2.ChatMessage, err *imv2.Error) { b.Error("message failed:", err) },
	}
	p := newBenchPair(b, 0, opts)
	defer p.close()
	ctx := context.Background()
	chans := make([]*imv2.Channel, latencyChannels)
	for i := range chans {
		ch, err := p.cli.OpenChannel(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		chans[i] = p.cli.engine(ch)
	}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = imv2.NewMessageID()
		index.Store(ids[i], i)
	}
	r := newLatencyRecorder(b.N)
	rec.Store(r)
	m := benchFinal
	b.ReportAllocs()
	b.ResetTimer()
	r.start = time.Now()
	for i := range b.N {
		r.pace(i)
		m.MessageID = ids[i]
		if _, err := chans[i%latencyChannels].Send(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	r.report(b)
}

func benchLatencyRaw(b *testing.B) {
	final, ack := benchFrames(b)
	ws, stop := rawEcho(b, ack)
	defer stop()
	r := newLatencyRecorder(b.N)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for i := 0; i < b.N; i++ {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
			r.acked(i) // one connection, in order: the i-th ack answers the i-th final
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	r.start = time.Now()
	for i := range b.N {
		r.pace(i)
		if err := ws.WriteMessage(websocket.TextMessage, final); err != nil {
			b.Fatal(err)
		}
	}
	r.report(b)
	b.StopTimer()
	<-readDone
}

// BenchmarkChannelsWS: throughput with 64 messages in flight spread over
// 1 and over 1,000 active channels of one connection (round robin), the
// rest as BenchmarkRoundTripWS/sdk-64; one op is one acknowledged
// message. The ratio ch-1000 ÷ ch-1 is what a connection's many channels
// cost.
func BenchmarkChannelsWS(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run("ch-"+strconv.Itoa(n), func(b *testing.B) { benchChannels(b, n, 64) })
	}
}

func benchChannels(b *testing.B, channels, inflight int) {
	slots := make(chan struct{}, inflight)
	var failed sync.Once
	opts := &imv2.Options{
		OnDelivered: func(string, imv2.ChatMessage, imv2.AckStatus) { <-slots },
		OnFailed: func(_ string, _ imv2.ChatMessage, err *imv2.Error) {
			failed.Do(func() { b.Error("message failed:", err) })
			<-slots
		},
	}
	p := newBenchPair(b, channels, opts)
	defer p.close()
	ctx := context.Background()
	chans := make([]*imv2.Channel, channels)
	for i := range chans {
		ch, err := p.cli.OpenChannel(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		chans[i] = p.cli.engine(ch)
	}
	b.ReportAllocs()
	b.ResetTimer()
	report := benchcpu.MeasureSyscalls(b)
	for i := range b.N {
		slots <- struct{}{}
		if _, err := chans[i%channels].Send(ctx, benchFinal); err != nil {
			b.Fatal(err)
		}
	}
	for range inflight {
		slots <- struct{}{}
	}
	report()
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC() // the second cycle frees what finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
