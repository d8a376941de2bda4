//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// token is the bot's token on the emulator (telego checks its shape).
const token = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi"

// emulator is telegram-test-api 4.2.1 (package.json), an independent
// implementation of the Bot API, run by node on a free loopback port, with
// a recording proxy in front of its bot side:
//
//   - getUpdates as the Bot API documents it: an update stays until a
//     call's offset confirms it, and an empty answer waits up to timeout
//     seconds (the emulator forgets an update once it returned it, and
//     answers at once), so a Connector killed before it stored an update
//     gets it again, as from Telegram;
//   - setWebhook as the Bot API documents it: the emulator posts updates
//     to the proxy (/hook), which posts them on to the URL the bridge set
//     with its secret_token in X-Telegram-Bot-Api-Secret-Token (the
//     emulator sends none), one at a time (max_connections 1; the emulator
//     posts at once), each with an update_id of its own (the emulator
//     gives updates posted while one is in flight the same), and answers
//     the emulator with the bridge's status; with twice set it posts each
//     update a second time after a 2xx, as Telegram does after an answer
//     it did not get; say waits until its update was posted;
//   - every other bot call passes through, recorded (method, chat, text,
//     time), so a test counts a chat's messages and edits.
//
// The user side ("the client") is the emulator's own HTTP API.
type emulator struct {
	url string // the emulator: its client API
	api string // the proxy: the Bot API the bridge is given

	gate sync.RWMutex // held by closeDoor while calls being applied finish

	mu      sync.Mutex
	closed  bool              // closeDoor: bot calls are answered 429
	knocked time.Time         // the last call answered 429
	pending []json.RawMessage // fetched from the emulator, not confirmed
	ids     []int
	calls   []call
	polls   int                          // getUpdates calls
	webhook struct{ url, secret string } // the bridge's setWebhook
	twice   bool                         // post each update to the webhook twice
	hooked  int                          // updates posted to the webhook
	hookMu  sync.Mutex                   // one post to the webhook at a time
}

// call is one bot call the proxy saw.
type call struct {
	method string
	chat   int64
	text   string
	at     time.Time
}

func startEmulator(t *testing.T) *emulator {
	t.Helper()
	port := freePort(t)
	script := fmt.Sprintf(`const S = require('telegram-test-api');
const s = new S({port: %d, host: '127.0.0.1', storeTimeout: 86400});
s.start().then(() => console.log('ready'));`, port)
	cmd := exec.Command("node", "-e", script)
	cmd.Dir = ".." // examples/telegram: its node_modules (npm ci)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lines{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start(), "node (Node 20) runs the emulator; npm ci in examples/telegram installs it")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line) == "ready"
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "emulator did not start: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("emulator did not start in 30 s: %s", stderr.String())
	}
	e := &emulator{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	target, _ := url.Parse(e.url)
	pass := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var p struct {
			ChatID  json.Number `json:"chat_id"`
			Text    string      `json:"text"`
			Offset  int         `json:"offset"`
			Timeout int         `json:"timeout"`
		}
		_ = json.Unmarshal(body, &p)
		method := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		if r.URL.Path == "/hook" {
			e.hook(w, body)
			return
		}
		if method == "setWebhook" { // the emulator posts to /hook, which posts on as Telegram does
			var h struct {
				URL    string `json:"url"`
				Secret string `json:"secret_token"`
			}
			_ = json.Unmarshal(body, &h)
			e.mu.Lock()
			e.webhook.url, e.webhook.secret = h.URL, h.Secret
			e.mu.Unlock()
			body, _ = json.Marshal(map[string]string{"url": e.api + "/hook"})
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		if method == "getUpdates" {
			e.mu.Lock()
			e.polls++
			e.mu.Unlock()
			e.getUpdates(w, r.Context(), p.Offset, p.Timeout)
			return
		}
		e.gate.RLock()
		defer e.gate.RUnlock()
		e.mu.Lock()
		if e.closed { // refused as Telegram refuses a flood: not applied
			e.knocked = time.Now()
			e.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 30","parameters":{"retry_after":30}}`)
			return
		}
		chat, _ := p.ChatID.Int64()
		e.calls = append(e.calls, call{method: method, chat: chat, text: p.Text, at: time.Now()})
		e.mu.Unlock()
		pass.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.api = srv.URL
	return e
}

// closeDoor answers every later bot call but getUpdates with a 429
// (retry_after 30 s), and returns once no call came for quiet: every
// conversation waits out its 429; open ends it.
func (e *emulator) closeDoor(t *testing.T, quiet time.Duration) (open func()) {
	e.gate.Lock()
	e.mu.Lock()
	e.closed, e.knocked = true, time.Now()
	e.mu.Unlock()
	e.gate.Unlock()
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return time.Since(e.knocked) > quiet
	}, time.Minute, 10*time.Millisecond)
	return func() {
		e.mu.Lock()
		e.closed = false
		e.mu.Unlock()
	}
}

// hook posts an update the emulator posted to the bridge's webhook, as
// Telegram does (see emulator).
func (e *emulator) hook(w http.ResponseWriter, update []byte) {
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	var u map[string]any
	_ = json.Unmarshal(update, &u)
	e.mu.Lock()
	url, secret, twice := e.webhook.url, e.webhook.secret, e.twice
	u["update_id"] = 1000 + e.hooked
	e.mu.Unlock()
	update, _ = json.Marshal(u)
	post := func() int {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(update))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return http.StatusBadGateway
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	status := post()
	if twice && status/100 == 2 {
		status = post()
	}
	e.mu.Lock()
	e.hooked++
	e.mu.Unlock()
	w.WriteHeader(status)
}

// getUpdates answers the unconfirmed updates from offset on, waiting up to
// timeout seconds (at most 2 here) for one to come.
func (e *emulator) getUpdates(w http.ResponseWriter, ctx context.Context, offset, timeout int) {
	deadline := time.Now().Add(time.Duration(min(timeout, 2)) * time.Second)
	for {
		var got struct {
			Result []json.RawMessage `json:"result"`
		}
		e.post("/bot"+token+"/getUpdates", map[string]any{}, &got)
		e.mu.Lock()
		for _, u := range got.Result {
			var id struct {
				UpdateID int `json:"update_id"`
			}
			_ = json.Unmarshal(u, &id)
			e.pending, e.ids = append(e.pending, u), append(e.ids, id.UpdateID)
		}
		for len(e.ids) > 0 && e.ids[0] < offset { // confirmed
			e.pending, e.ids = e.pending[1:], e.ids[1:]
		}
		res := append([]json.RawMessage{}, e.pending[:min(len(e.pending), 100)]...)
		e.mu.Unlock()
		if len(res) > 0 || time.Now().After(deadline) || ctx.Err() != nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": res})
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *emulator) post(path string, in, out any) {
	b, _ := json.Marshal(in)
	resp, err := http.Post(e.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(out)
}

// say sends text to the bot as user in chat (a negative chat is a group).
func (e *emulator) say(t *testing.T, chat int64, text string) {
	t.Helper()
	typ := "private"
	if chat < 0 {
		typ = "group"
	}
	user := map[string]any{"id": 1000 + chat%1000, "first_name": "User", "is_bot": false}
	e.mu.Lock()
	hooked, webhook := e.hooked, e.webhook.url != ""
	e.mu.Unlock()
	var ok struct{ Ok bool }
	e.post("/sendMessage", map[string]any{"botToken": token, "from": user, "text": text, "date": time.Now().Unix(),
		"chat": map[string]any{"id": chat, "type": typ, "title": "Chat " + strconv.FormatInt(chat, 10), "first_name": "User"}}, &ok)
	require.True(t, ok.Ok, "the emulator took the user's message")
	if webhook { // the emulator answers before it posted the update: the user waits for that
		require.Eventually(t, func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.hooked > hooked
		}, 30*time.Second, 5*time.Millisecond)
	}
}

// shown is one message of the bot as the chat shows it now.
type shown struct {
	id   int
	text string
}

// shown returns the bot's messages in each chat, oldest first, with their
// text as last edited, without the pairing's "Connected" note.
func (e *emulator) shown() map[int64][]shown {
	var h struct {
		Result []struct {
			MessageID int `json:"messageId"`
			Message   struct {
				ChatID json.Number `json:"chat_id"`
				Text   string      `json:"text"`
			} `json:"message"`
		} `json:"result"`
	}
	e.post("/getUpdatesHistory", map[string]string{"token": token}, &h)
	out := map[int64][]shown{}
	for _, r := range h.Result {
		chat, err := r.Message.ChatID.Int64()
		if err != nil || r.Message.Text == connected {
			continue // a user's message, or the pairing note
		}
		out[chat] = append(out[chat], shown{r.MessageID, r.Message.Text})
	}
	for _, s := range out {
		sort.Slice(s, func(i, j int) bool { return s[i].id < s[j].id })
	}
	return out
}

// connected is the note the bridge sends to a chat it paired.
const connected = "Connected to xAgent."

// callsTo returns the message calls (send, edit) to chat, or to every
// chat for 0, without the pairing notes.
func (e *emulator) callsTo(chat int64) []call {
	e.mu.Lock()
	defer e.mu.Unlock()
	var cs []call
	for _, c := range e.calls {
		if (c.method == "sendMessage" || c.method == "editMessageText") && c.text != connected && (chat == 0 || c.chat == chat) {
			cs = append(cs, c)
		}
	}
	return cs
}

// checkPaced fails t unless calls at these times kept to rate a second:
// the k-th call after any call came at least k/rate later, less slack. The
// kit's token bucket (burst 1) grants a call every 1/rate, and the call
// leaves after the bridge's own store write (its trace of a final) and
// the scheduler's say: under -race on a shared machine up to ~150 ms
// after, which the slack of 250 ms covers. A Connector at twice the rate
// fails it within two calls.
func checkPaced(t *testing.T, what string, at []call, rate float64) {
	t.Helper()
	const slack = 250 * time.Millisecond
	for i := range at {
		for j := i + 1; j < len(at); j++ {
			want := time.Duration(float64(j-i)/rate*float64(time.Second)) - slack
			if got := at[j].at.Sub(at[i].at); got < want {
				var around []string
				for k := max(0, i-3); k <= min(len(at)-1, j+3); k++ {
					around = append(around, fmt.Sprintf("%d %s %d %s", k, at[k].at.Format("05.000"), at[k].chat, at[k].method))
				}
				t.Fatalf("%s: calls %d (%s %q) and %d (%s %q) %v apart, under %v: more than %v a second\n%s",
					what, i, at[i].method, at[i].text, j, at[j].method, at[j].text, got, want+slack, rate, strings.Join(around, "\n"))
			}
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
