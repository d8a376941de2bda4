package dataplane

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/benchcpu"
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
		URL:         hs.URL,
		Target:      noop,
		Options:     opts,
		Store:       NewMemoryChannelStore(maxChannels),
		MaxChannels: maxChannels,
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
	report := benchcpu.Measure(b)
	for range b.N {
		slots <- struct{}{}
		if _, err := ch.Send(ctx, benchFinal); err != nil {
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
	p, err := imv2.NewChatMessage("cch_"+strings.Repeat("0", 36), imv2.ToConnector, m)
	if err != nil {
		b.Fatal(err)
	}
	a, err := imv2.AckFor(p, imv2.AckAccepted, nil)
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

func benchRoundTripRaw(b *testing.B, inflight int) {
	final, ack := benchFrames(b)
	up := websocket.Upgrader{Subprotocols: []string{imv2.Subprotocol}}
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
	defer hs.Close()
	d := websocket.Dialer{Subprotocols: []string{imv2.Subprotocol}}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
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
	report := benchcpu.Measure(b)
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
	_ = ws.Close()
	<-readDone
	served.Wait()
}

// BenchmarkIdleChannels opens 10,000 channels on one data-plane
// connection and reports the heap they hold, both ends together (the
// Connector's Server and Channels, xAgent's Client and Channels, the
// registry and the stores), per channel.
func BenchmarkIdleChannels(b *testing.B) {
	const channels = 10_000
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
		perChannel = float64(after-before) / channels
		p.close()
	}
	b.ReportMetric(perChannel, "B/channel")
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC() // the second cycle frees what finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
