//go:build unix

package main

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

// server is one Bot API server for one side of the run: telegram-test-api
// 4.2.1 (../package.json), run by node on a free loopback port, behind a
// recording proxy that both sides talk to. The proxy makes the emulator
// answer as the Bot API documents where it does not:
//
//   - getUpdates keeps an update until an offset confirms it and waits up
//     to timeout seconds (at most 2) for one (the emulator forgets what it
//     returned and answers at once, which would make a poller spin);
//   - editMessageText answers the edited Message (the emulator: null);
//     an edit with no text is refused 400 "message text is empty", as by a
//     server without Bot API 10.1's rich messages (the emulator keeps the
//     old text and answers ok);
//   - sendChatAction is answered true, as by Telegram, so both sides
//     show typing as they would there (the emulator lacks it);
//   - a method the emulator lacks is answered 404 "Not Found", as by
//     Telegram (the emulator: 500 with no Bot API body).
//
// Every other call passes through; every bot call but getUpdates is
// recorded with its answer's status.
type server struct {
	emu   string // the emulator: its client API
	api   string // the proxy: the Bot API a side is given
	cmd   *exec.Cmd
	proxy *http.Server

	mu      sync.Mutex
	pending []json.RawMessage // fetched from the emulator, not confirmed
	ids     []int
	calls   []call
}

// call is one bot call the proxy answered.
type call struct {
	method string
	chat   int64
	text   string
	status int
	at     time.Time
}

// token is the bot's token on the emulator (telego checks its shape).
const token = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi"

func startServer(ctx context.Context, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	script := fmt.Sprintf(`const S = require('telegram-test-api');
new S({port: %d, host: '127.0.0.1', storeTimeout: 86400}).start().then(() => console.log('ready'));`, port)
	s := &server{emu: fmt.Sprintf("http://127.0.0.1:%d", port)}
	s.cmd = exec.Command("node", "-e", script)
	s.cmd.Dir = dir
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("node runs the emulator (npm ci in examples/telegram installs it): %w", err)
	}
	if err := waitLine(ctx, out, "ready", 30*time.Second); err != nil {
		s.close()
		return nil, fmt.Errorf("emulator: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.close()
		return nil, err
	}
	target, _ := url.Parse(s.emu)
	s.proxy = &http.Server{Handler: s.handler(httputil.NewSingleHostReverseProxy(target)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.proxy.Serve(l) }()
	s.api = "http://" + l.Addr().String()
	return s, nil
}

func (s *server) close() {
	if s.proxy != nil {
		_ = s.proxy.Close()
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func (s *server) handler(pass *httputil.ReverseProxy) http.Handler {
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
		method := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		if method == "getUpdates" {
			s.getUpdates(w, r.Context(), p.Offset, p.Timeout)
			return
		}
		chat, _ := p.ChatID.Int64()
		text := ""
		if p.Text != nil {
			text = *p.Text
		}
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		switch {
		case method == "sendChatAction":
			rec.answer(http.StatusOK, `{"ok":true,"result":true}`)
		case method == "editMessageText" && text == "":
			rec.answer(http.StatusBadRequest, `{"ok":false,"error_code":400,"description":"Bad Request: message text is empty"}`)
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
			pass.ServeHTTP(rec, r)
		}
		if rec.status == http.StatusInternalServerError && bytes.Contains(rec.body.Bytes(), []byte("is not supported")) {
			rec.answer(http.StatusNotFound, `{"ok":false,"error_code":404,"description":"Not Found"}`)
		}
		if method == "editMessageText" && rec.status == http.StatusOK {
			id, _ := p.MessageID.Int64()
			edited, _ := json.Marshal(map[string]any{"ok": true, "result": map[string]any{
				"message_id": id, "date": time.Now().Unix(), "edit_date": time.Now().Unix(), "text": text,
				"chat": map[string]any{"id": chat, "type": "private", "first_name": "User"},
				"from": map[string]any{"id": 123456, "is_bot": true, "first_name": "Test Name", "username": "TestNameBot"}}})
			rec.answer(http.StatusOK, string(edited))
		}
		s.mu.Lock()
		s.calls = append(s.calls, call{method: method, chat: chat, text: text, status: rec.status, at: time.Now()})
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
func (s *server) getUpdates(w http.ResponseWriter, ctx context.Context, offset, timeout int) {
	deadline := time.Now().Add(time.Duration(min(timeout, 2)) * time.Second)
	for {
		var got struct {
			Result []json.RawMessage `json:"result"`
		}
		_ = s.post("/bot"+token+"/getUpdates", map[string]any{}, &got)
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
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) post(path string, in, out any) error {
	b, _ := json.Marshal(in)
	resp, err := http.Post(s.emu+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// say sends text to the bot as the user of the private chat chat.
func (s *server) say(chat int64, text string) error {
	user := map[string]any{"id": chat, "first_name": "User", "is_bot": false}
	var ok struct{ Ok bool }
	err := s.post("/sendMessage", map[string]any{"botToken": token, "from": user, "text": text, "date": time.Now().Unix(),
		"chat": map[string]any{"id": chat, "type": "private", "first_name": "User"}}, &ok)
	if err == nil && !ok.Ok {
		err = fmt.Errorf("the emulator refused the user's message %q", text)
	}
	return err
}

// shown returns the texts of the bot's messages in each chat, oldest
// first, as last edited, without the pairing's note.
func (s *server) shown() (map[int64][]string, error) {
	var h struct {
		Result []struct {
			MessageID int `json:"messageId"`
			Message   struct {
				ChatID json.Number `json:"chat_id"`
				Text   string      `json:"text"`
			} `json:"message"`
		} `json:"result"`
	}
	if err := s.post("/getUpdatesHistory", map[string]string{"token": token}, &h); err != nil {
		return nil, err
	}
	sort.Slice(h.Result, func(i, j int) bool { return h.Result[i].MessageID < h.Result[j].MessageID })
	out := map[int64][]string{}
	for _, r := range h.Result {
		chat, err := r.Message.ChatID.Int64()
		if err != nil || r.Message.Text == connected {
			continue // a user's message, or the pairing note
		}
		out[chat] = append(out[chat], r.Message.Text)
	}
	return out, nil
}

// connected is the note the Connector sends to a chat it paired.
const connected = "Connected to xAgent."

// recorded returns the calls answered so far, without the pairing notes.
func (s *server) recorded() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []call
	for _, c := range s.calls {
		if c.text != connected {
			cs = append(cs, c)
		}
	}
	return cs
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitLine reads r until a line containing want, and drains it after.
func waitLine(ctx context.Context, r io.Reader, want string, within time.Duration) error {
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

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
