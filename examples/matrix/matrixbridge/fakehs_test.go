package matrixbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// fakeHS is the part of a homeserver the Platform's outbound side uses:
// send (deduplicated by transaction ID, as the spec requires), redact,
// typing and media upload. fail makes the next requests answer an error.
type fakeHS struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	byTxn     map[string]string // txn → event ID
	events    []fakeEvent       // accepted sends, in order
	puts      []string          // every send/redact path, answered or not
	uploads   [][]byte
	downloads int // media download requests
	typing    []bool
	fail      []fakeFail // answered in order, before any success
	n         int        // requests seen
	failAt    map[int]int
	sent      chan string // the ID of every event accepted, as it is
}

type fakeEvent struct {
	Txn     string
	ID      string
	Content map[string]any
}

type fakeFail struct {
	status       int
	errcode      string
	retryAfterMS int
}

func newFakeHS(t *testing.T) *fakeHS {
	f := &fakeHS{t: t, byTxn: map[string]string{}}
	f.sent = make(chan string, 64)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeHS) failNext(status int, errcode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = append(f.fail, fakeFail{status: status, errcode: errcode})
}

// failRequest makes request number n (counting from 1) answer status.
func (f *fakeHS) failRequest(n, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAt == nil {
		f.failAt = map[int]int{}
	}
	f.failAt[n] = status
}

func (f *fakeHS) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	f.n++
	if st, ok := f.failAt[f.n]; ok {
		w.WriteHeader(st)
		return
	}
	p := r.URL.Path
	if strings.Contains(p, "/send/") || strings.Contains(p, "/redact/") {
		f.puts = append(f.puts, p)
	}
	if len(f.fail) > 0 {
		e := f.fail[0]
		f.fail = f.fail[1:]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		_, _ = fmt.Fprintf(w, `{"errcode":%q,"error":"refused (secret-ish detail)","retry_after_ms":%d}`, e.errcode, e.retryAfterMS)
		return
	}
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case strings.Contains(p, "/send/") || strings.Contains(p, "/redact/"):
		txn := p[strings.LastIndex(p, "/")+1:]
		if ev, ok := f.byTxn[txn]; ok {
			reply(map[string]string{"event_id": ev}) // idempotent per transaction
			return
		}
		ev := fmt.Sprintf("$ev%d", len(f.events)+1)
		var content map[string]any
		_ = json.Unmarshal(body, &content)
		f.byTxn[txn] = ev
		f.events = append(f.events, fakeEvent{Txn: txn, ID: ev, Content: content})
		select {
		case f.sent <- ev:
		default:
		}
		reply(map[string]string{"event_id": ev})
	case strings.HasSuffix(p, "/typing/@bot:fake"):
		var req struct {
			Typing bool `json:"typing"`
		}
		_ = json.Unmarshal(body, &req)
		f.typing = append(f.typing, req.Typing)
		reply(map[string]any{})
	case strings.Contains(p, "/media/download/") || strings.Contains(p, "/media/v3/download/"):
		f.downloads++
		_, _ = io.WriteString(w, "media bytes")
	case strings.HasSuffix(p, "/media/v3/upload"):
		f.uploads = append(f.uploads, body)
		reply(map[string]string{"content_uri": fmt.Sprintf("mxc://fake/m%d", len(f.uploads))})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"errcode":"M_UNRECOGNIZED","error":"unknown"}`)
	}
}

func (f *fakeHS) snapshot() (events []fakeEvent, puts []string, uploads int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeEvent(nil), f.events...), append([]string(nil), f.puts...), len(f.uploads)
}

// bound returns a Bridge with channel "ch" signed in to a room on f, and
// the file host behind it.
func (f *fakeHS) bound(t *testing.T) (*Bridge, *connector.Handler) {
	t.Helper()
	b, err := New(Config{Build: protocol.Build{BuildTime: "1"}, APIKey: "k"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	f.bind(t, b)
	return b, b.Connector().Handler()
}

// bind binds channel "ch" (or the one given) to the room on f, as a
// sign-in does.
func (f *fakeHS) bind(t *testing.T, b *Bridge, ch ...string) {
	acc := Account{Homeserver: f.srv.URL, UserID: "@bot:fake", AccessToken: "tok-SECRET", Since: "s0"}
	require.NoError(t, b.Connector().Bind(context.Background(), state.Binding{
		ChannelID: append(ch, "ch")[0], Key: "!room:fake", Data: acc.Data(),
	}))
}

// conv is the Conversation the kit hands the platform for ch: its
// binding's key and Data, none when it is unbound.
func conv(t *testing.T, br *Bridge, ch string) connector.Conversation {
	t.Helper()
	b, _, err := br.Connector().Binding(context.Background(), ch)
	require.NoError(t, err)
	return connector.Conversation{ChannelID: ch, Key: b.Key, Target: b.Target, Data: b.Data}
}

// message is what the kit hands the platform for m: its files opened from
// the channel's uploads and its idempotency key.
func message(t *testing.T, b *Bridge, ch string, m *imv2.ChatMessage) *connector.Message {
	t.Helper()
	msg := &connector.Message{ChatMessage: m, IdempotencyKey: imv2.IdempotencyKeyOf(ch, m.MessageID)}
	for _, f := range m.Files {
		rc, info, err := b.Connector().Handler().OpenFile(context.Background(), ch, f.FileRef)
		require.NoError(t, err)
		t.Cleanup(func() { _ = rc.Close() })
		msg.Attachments = append(msg.Attachments, connector.OutboundFile{File: f, Info: info, Reader: rc})
	}
	return msg
}

// send posts m to ch as the kit does.
func send(t *testing.T, b *Bridge, ch string, m *imv2.ChatMessage) error {
	return b.Post(context.Background(), conv(t, b, ch), message(t, b, ch, m))
}
