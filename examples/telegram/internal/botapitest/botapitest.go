// Package botapitest runs telegram-test-api 4.2.1 (examples/telegram's
// package.json), an independent implementation of the Bot API, by node
// on a free loopback port, behind a recording proxy that makes it answer
// as the Bot API documents where it does not:
//
//   - getUpdates keeps an update until a call's offset confirms it, and an
//     empty answer waits up to timeout seconds (at most 2) for one (the
//     emulator forgets an update once it returned it and answers at once,
//     which would make a poller spin, and would lose an update a Connector
//     killed before it stored it gets again from Telegram);
//   - setWebhook: the emulator posts updates to the proxy (/hook), which
//     posts them on to the URL set, with its secret_token in
//     X-Telegram-Bot-Api-Secret-Token (the emulator sends none), one at a
//     time (max_connections 1; the emulator posts at once), each with an
//     update_id of its own (the emulator gives updates posted while one is
//     in flight the same), and answers the emulator with the receiver's
//     status; with PostTwice each update is posted a second time after a
//     2xx, as Telegram does after an answer it did not get;
//   - editMessageText answers the edited Message (the emulator: null); an
//     edit with no text is refused 400 "message text is empty", as by a
//     server without Bot API 10.1's rich messages (the emulator keeps the
//     old text and answers ok);
//   - a method the emulator lacks is answered 404 "Not Found", as by
//     Telegram (the emulator: 500 with no Bot API body); sendChatAction is
//     such a method unless Options.Typing answers it true;
//   - CloseDoor answers bot calls 429, as Telegram refuses a flood.
//
// Every other bot call passes through. Every bot call but getUpdates and
// those CloseDoor refused is recorded (Calls) in the order it came. The
// user side is the emulator's own client API (Say, Shown).
package botapitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Token is the bot's token on the emulator (telego checks its shape).
const Token = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi"

// Connected is the note the Connector sends to a chat it paired; Shown
// and Calls leave it out.
const Connected = "Connected to xAgent."

// Options says where the emulator is installed and how the proxy answers
// where callers want different servers.
type Options struct {
	// Dir is the folder whose node_modules holds telegram-test-api
	// (examples/telegram after npm ci).
	Dir string
	// Typing answers sendChatAction true, as Telegram does; without it the
	// proxy answers 404 as for any method the emulator lacks.
	Typing bool
}

// Call is one bot call the proxy answered.
type Call struct {
	Method string
	Chat   int64
	Text   string
	Status int       // the answer's HTTP status
	At     time.Time // when the call came
}

// Message is one bot message as its chat shows it now.
type Message struct {
	ID   int
	Text string
}

// Server is one emulator behind its proxy. Close stops both.
type Server struct {
	// API is the proxy's address: the Bot API server a bot is given.
	API string

	emu    string // the emulator's own address: its client API
	opts   Options
	cmd    *exec.Cmd
	proxy  *http.Server
	served chan struct{} // closed when the proxy's Serve returned
	client *http.Client  // the proxy's own, so Close ends its connections

	gate sync.RWMutex // held by CloseDoor while calls being applied finish

	mu      sync.Mutex
	closed  bool              // CloseDoor: bot calls are answered 429
	knocked time.Time         // the last call answered 429
	pending []json.RawMessage // fetched from the emulator, not confirmed
	ids     []int
	calls   []Call
	polls   int                          // getUpdates calls
	webhook struct{ url, secret string } // the bot's setWebhook
	twice   bool                         // post each update to the webhook twice
	hooked  int                          // updates posted to the webhook
	hookMu  sync.Mutex                   // one post to the webhook at a time
}

// Start runs the emulator and its proxy; ctx bounds only the start.
func Start(ctx context.Context, o Options) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	script := fmt.Sprintf(`const S = require('telegram-test-api');
new S({port: %d, host: '127.0.0.1', storeTimeout: 86400}).start().then(() => console.log('ready'));`, port)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	s := &Server{emu: fmt.Sprintf("http://127.0.0.1:%d", port), opts: o, client: &http.Client{Transport: transport}}
	s.cmd = exec.Command("node", "-e", script)
	s.cmd.Dir = o.Dir
	var stderr bytes.Buffer // read once node has exited: why it did not start
	s.cmd.Stderr = &stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("node (Node 20) runs the emulator; npm ci in examples/telegram installs it: %w", err)
	}
	if err := WaitLine(ctx, out, "ready", 30*time.Second); err != nil {
		s.Close()
		return nil, fmt.Errorf("emulator: %w: %s", err, stderr.String())
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, err
	}
	target, _ := url.Parse(s.emu)
	pass := httputil.NewSingleHostReverseProxy(target)
	pass.Transport = transport
	s.proxy = &http.Server{Handler: s.handler(pass), ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	go func() { defer close(s.served); _ = s.proxy.Serve(l) }()
	s.API = "http://" + l.Addr().String()
	return s, nil
}

// Close stops the proxy (the calls it was answering end: a long poll
// answers at once) and the emulator.
func (s *Server) Close() {
	if s.proxy != nil {
		_ = s.proxy.Close() // cancels each call's context: a long poll ends
		<-s.served
	}
	s.client.CloseIdleConnections()
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func (s *Server) handler(pass *httputil.ReverseProxy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			ChatID    json.Number `json:"chat_id"`
			MessageID json.Number `json:"message_id"`
			Text      *string     `json:"text"`
			Offset    int         `json:"offset"`
			Timeout   int         `json:"timeout"`
		}
		_ = json.Unmarshal(body, &p)
		if r.URL.Path == "/hook" {
			s.hook(r.Context(), w, body)
			return
		}
		method := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		if method == "getUpdates" {
			s.mu.Lock()
			s.polls++
			s.mu.Unlock()
			s.getUpdates(r.Context(), w, p.Offset, p.Timeout)
			return
		}
		if method == "setWebhook" { // the emulator posts to /hook, which posts on as Telegram does
			var h struct {
				URL    string `json:"url"`
				Secret string `json:"secret_token"`
			}
			_ = json.Unmarshal(body, &h)
			s.mu.Lock()
			s.webhook.url, s.webhook.secret = h.URL, h.Secret
			s.mu.Unlock()
			body, _ = json.Marshal(map[string]string{"url": s.API + "/hook"})
		}
		chat, _ := p.ChatID.Int64()
		text := ""
		if p.Text != nil {
			text = *p.Text
		}
		s.gate.RLock()
		defer s.gate.RUnlock()
		s.mu.Lock()
		if s.closed { // refused as Telegram refuses a flood: not applied, not recorded
			s.knocked = time.Now()
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 30","parameters":{"retry_after":30}}`)
			return
		}
		// Recorded as it comes, so Calls is in the order of At.
		i := len(s.calls)
		s.calls = append(s.calls, Call{Method: method, Chat: chat, Text: text, At: time.Now()})
		s.mu.Unlock()

		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		switch {
		case method == "sendChatAction" && s.opts.Typing:
			rec.answer(http.StatusOK, `{"ok":true,"result":true}`)
		case method == "editMessageText" && text == "":
			rec.answer(http.StatusBadRequest, `{"ok":false,"error_code":400,"description":"Bad Request: message text is empty"}`)
		default:
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			pass.ServeHTTP(rec, r)
		}
		if rec.status == http.StatusInternalServerError && bytes.Contains(rec.body.Bytes(), []byte("is not supported")) {
			rec.answer(http.StatusNotFound, `{"ok":false,"error_code":404,"description":"Not Found"}`)
		}
		if method == "editMessageText" && rec.status == http.StatusOK {
			id, _ := p.MessageID.Int64()
			now := time.Now().Unix()
			edited, _ := json.Marshal(map[string]any{"ok": true, "result": map[string]any{
				"message_id": id, "date": now, "edit_date": now, "text": text,
				"chat": map[string]any{"id": chat, "type": "private", "first_name": "User"},
				"from": map[string]any{"id": 123456, "is_bot": true, "first_name": "Test Name", "username": "TestNameBot"}}})
			rec.answer(http.StatusOK, string(edited))
		}
		s.mu.Lock()
		s.calls[i].Status = rec.status
		s.mu.Unlock()
		for k, v := range rec.header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	})
}

// recorder holds the emulator's answer until the proxy has looked at it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

func (r *recorder) answer(status int, body string) {
	r.status = status
	r.header.Set("Content-Type", "application/json")
	r.body.Reset()
	r.body.WriteString(body)
}

// getUpdates answers the unconfirmed updates from offset on, waiting up to
// timeout seconds (at most 2 here) for one to come.
func (s *Server) getUpdates(ctx context.Context, w http.ResponseWriter, offset, timeout int) {
	deadline := time.Now().Add(time.Duration(min(timeout, 2)) * time.Second)
	for {
		var got struct {
			Result []json.RawMessage `json:"result"`
		}
		_ = s.post(ctx, "/bot"+Token+"/getUpdates", map[string]any{}, &got)
		s.mu.Lock()
		for _, u := range got.Result {
			var id struct {
				UpdateID int `json:"update_id"`
			}
			_ = json.Unmarshal(u, &id)
			s.pending, s.ids = append(s.pending, u), append(s.ids, id.UpdateID)
		}
		for len(s.ids) > 0 && s.ids[0] < offset { // confirmed
			s.pending, s.ids = s.pending[1:], s.ids[1:]
		}
		res := append([]json.RawMessage{}, s.pending[:min(len(s.pending), 100)]...)
		s.mu.Unlock()
		if len(res) > 0 || time.Now().After(deadline) || ctx.Err() != nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": res})
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// hook posts an update the emulator posted to the webhook set, as
// Telegram does (see the package doc).
func (s *Server) hook(ctx context.Context, w http.ResponseWriter, update []byte) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	var u map[string]any
	_ = json.Unmarshal(update, &u)
	if u == nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	url, secret, twice := s.webhook.url, s.webhook.secret, s.twice
	u["update_id"] = 1000 + s.hooked
	s.mu.Unlock()
	update, _ = json.Marshal(u)
	post := func() int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(update))
		if err != nil {
			return http.StatusBadGateway
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		resp, err := s.client.Do(req)
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
	s.mu.Lock()
	s.hooked++
	s.mu.Unlock()
	w.WriteHeader(status)
}

func (s *Server) post(ctx context.Context, path string, in, out any) error {
	b, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.emu+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// Say sends text to the bot as a user in chat (a negative chat is a
// group). With a webhook set it returns once the update was posted to it,
// as the emulator answers before it posted.
func (s *Server) Say(ctx context.Context, chat int64, text string) error {
	typ := "private"
	if chat < 0 {
		typ = "group"
	}
	user := map[string]any{"id": 1000 + chat%1000, "first_name": "User", "is_bot": false}
	s.mu.Lock()
	hooked, webhook := s.hooked, s.webhook.url != ""
	s.mu.Unlock()
	var ok struct{ Ok bool }
	err := s.post(ctx, "/sendMessage", map[string]any{"botToken": Token, "from": user, "text": text, "date": time.Now().Unix(),
		"chat": map[string]any{"id": chat, "type": typ, "title": "Chat " + strconv.FormatInt(chat, 10), "first_name": "User"}}, &ok)
	if err == nil && !ok.Ok {
		err = fmt.Errorf("the emulator refused the user's message %q", text)
	}
	if err != nil || !webhook {
		return err
	}
	return s.until(ctx, 30*time.Second, func() bool { return s.hooked > hooked })
}

// until waits until cond, called with s.mu held, holds.
func (s *Server) until(ctx context.Context, within time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Shown returns the bot's messages in each chat, oldest first, with their
// text as last edited, without the Connected note.
func (s *Server) Shown(ctx context.Context) (map[int64][]Message, error) {
	var h struct {
		Result []struct {
			MessageID int `json:"messageId"`
			Message   struct {
				ChatID json.Number `json:"chat_id"`
				Text   string      `json:"text"`
			} `json:"message"`
		} `json:"result"`
	}
	if err := s.post(ctx, "/getUpdatesHistory", map[string]string{"token": Token}, &h); err != nil {
		return nil, err
	}
	sort.Slice(h.Result, func(i, j int) bool { return h.Result[i].MessageID < h.Result[j].MessageID })
	out := map[int64][]Message{}
	for _, r := range h.Result {
		chat, err := r.Message.ChatID.Int64()
		if err != nil || r.Message.Text == Connected {
			continue // a user's message, or the pairing note
		}
		out[chat] = append(out[chat], Message{r.MessageID, r.Message.Text})
	}
	return out, nil
}

// Calls returns the bot calls recorded so far, in the order they came,
// without the Connected notes.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []Call
	for _, c := range s.calls {
		if c.Text != Connected {
			cs = append(cs, c)
		}
	}
	return cs
}

// Polls returns how many getUpdates calls came.
func (s *Server) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// Webhook returns the URL and secret of the last setWebhook.
func (s *Server) Webhook() (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook.url, s.webhook.secret
}

// PostTwice posts each later update to the webhook a second time after
// a 2xx, as Telegram does after an answer it did not get.
func (s *Server) PostTwice() {
	s.mu.Lock()
	s.twice = true
	s.mu.Unlock()
}

// CloseDoor answers every later bot call but getUpdates with a 429
// (retry_after 30 s), and returns once no call came for quiet (or with
// ctx's error): every conversation waits out its 429. open ends it.
func (s *Server) CloseDoor(ctx context.Context, quiet time.Duration) (open func(), err error) {
	s.gate.Lock() // the calls being applied finish first
	s.mu.Lock()
	s.closed, s.knocked = true, time.Now()
	s.mu.Unlock()
	s.gate.Unlock()
	open = func() {
		s.mu.Lock()
		s.closed = false
		s.mu.Unlock()
	}
	return open, s.until(ctx, time.Minute, func() bool { return time.Since(s.knocked) > quiet })
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitLine reads r until a line containing want, within the time given,
// and drains r after (so a process writing to it never blocks).
func WaitLine(ctx context.Context, r io.Reader, want string, within time.Duration) error {
	found := make(chan error, 1)
	go func() {
		br := bufio.NewReader(r)
		var seen []string
		for sent := false; ; {
			line, err := br.ReadString('\n')
			if !sent && strings.Contains(line, want) {
				found <- nil
				sent = true
			} else if !sent && len(seen) < 20 {
				seen = append(seen, strings.TrimSpace(line))
			}
			if err != nil {
				if !sent {
					found <- fmt.Errorf("ended before %q: %s", want, strings.Join(seen, " | "))
				}
				return
			}
		}
	}()
	select {
	case err := <-found:
		return err
	case <-time.After(within):
		return fmt.Errorf("no %q in %v", want, within)
	case <-ctx.Done():
		return ctx.Err()
	}
}
