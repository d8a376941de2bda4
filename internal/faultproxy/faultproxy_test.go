package faultproxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is an upstream that echoes every frame and records the subprotocol.
func echo(t *testing.T) *httptest.Server {
	up := websocket.Upgrader{Subprotocols: []string{"xagent.connector.packet.v1"}}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			typ, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if c.WriteMessage(typ, b) != nil {
				return
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func dial(t *testing.T, p *Proxy) (*websocket.Conn, func()) {
	t.Helper()
	srv := httptest.NewServer(p)
	d := websocket.Dialer{Subprotocols: []string{"xagent.connector.packet.v1"}}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), http.Header{"Authorization": {"Bearer k"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Subprotocol() != "xagent.connector.packet.v1" {
		t.Fatalf("subprotocol %q not passed through", c.Subprotocol())
	}
	return c, func() { c.Close(); p.Close(); srv.Close() }
}

func wsURL(s *httptest.Server) string { return "ws" + strings.TrimPrefix(s.URL, "http") }

func TestProxyRelaysWithoutFaults(t *testing.T) {
	p := New(wsURL(echo(t)), Faults{})
	c, done := dial(t, p)
	defer done()
	for i := range 50 {
		msg := fmt.Sprint(i)
		if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, b, err := c.ReadMessage()
		if err != nil || string(b) != msg {
			t.Fatalf("got %q, %v; want %q", b, err, msg)
		}
	}
}

func TestProxyDropsAndDuplicates(t *testing.T) {
	p := New(wsURL(echo(t)), Faults{Drop: 0.3, Duplicate: 0.3, Seed: 7})
	c, done := dial(t, p)
	defer done()
	const n = 200
	for i := range n {
		if err := c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, _, err := c.ReadMessage(); err != nil {
			break
		}
		got++
	}
	s := p.Stats()
	if s.Dropped == 0 || s.Duplicated == 0 {
		t.Fatalf("no faults injected: %+v", s)
	}
	if got == 2*n || got == 0 {
		t.Fatalf("received %d frames of %d sent: faults had no visible effect", got, n)
	}
}

func TestProxyHalfOpenAndCut(t *testing.T) {
	p := New(wsURL(echo(t)), Faults{})
	c, done := dial(t, p)
	defer done()
	p.HalfOpen(true)
	_ = c.WriteMessage(websocket.TextMessage, []byte("lost"))
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("a half-open proxy forwarded a frame")
	}
	p.CutAll()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("read after a cut succeeded")
	}
}
