package tgbridge_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const token = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi"

// docAPI is a Bot API server written from the Bot API documentation
// (core.telegram.org/bots/api), for what telegram-test-api does not
// serve: sendMessageDraft, sendChatAction, sendDocument and sendPhoto
// (multipart/form-data), getFile with its download path, and 429 answers
// with parameters.retry_after, setWebhook and deleteWebhook. getUpdates
// keeps an update until an offset confirms it, and answers 409 while a
// webhook is set; editMessageText to the text shown answers 400 "message
// is not modified". Every call is recorded. post delivers an update as
// Telegram does to a webhook.
type docAPI struct {
	srv *httptest.Server

	mu      sync.Mutex
	calls   []apiCall
	updates []map[string]any
	nextID  int
	limited map[string]int    // method: how many next calls answer 429
	files   map[string][]byte // file_id: bytes (file_path is the file_id)
	shown   map[int]string    // message_id: text
	hook    apiCall           // the last setWebhook; its text is the URL, "" when deleted
}

type apiCall struct {
	method, text, file string
	chat               int64
	draft              int
	secret             string // setWebhook's secret_token
	maxConns           int    // and max_connections
	data               []byte
	status             int
	at                 time.Time
}

func startDocAPI(t *testing.T) *docAPI {
	a := &docAPI{limited: map[string]int{}, files: map[string][]byte{}, shown: map[int]string{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *docAPI) serve(w http.ResponseWriter, r *http.Request) {
	if path, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+token+"/"); ok {
		a.mu.Lock()
		data, ok := a.files[path]
		a.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+token+"/")
	if !ok {
		answer(w, 401, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	c := apiCall{method: method, at: time.Now()}
	var p struct {
		ChatID    json.Number `json:"chat_id"`
		Text      string      `json:"text"`
		DraftID   int         `json:"draft_id"`
		MessageID int         `json:"message_id"`
		Offset    int         `json:"offset"`
		FileID    string      `json:"file_id"`
		URL       string      `json:"url"`
		Secret    string      `json:"secret_token"`
		MaxConns  int         `json:"max_connections"`
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			answer(w, 400, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: " + err.Error()})
			return
		}
		p.ChatID = json.Number(r.FormValue("chat_id"))
		for _, field := range []string{"document", "photo"} {
			if f, h, err := r.FormFile(field); err == nil {
				c.file, c.data = h.Filename, must(io.ReadAll(f))
			}
		}
	} else {
		_ = json.NewDecoder(r.Body).Decode(&p)
	}
	c.chat, _ = p.ChatID.Int64()
	c.text, c.draft, c.secret, c.maxConns = cmp.Or(p.Text, p.URL), p.DraftID, p.Secret, p.MaxConns
	a.mu.Lock()
	defer a.mu.Unlock()
	defer func() { a.calls = append(a.calls, c) }()
	if a.limited[method] > 0 {
		a.limited[method]--
		c.status = 429
		answer(w, 429, map[string]any{"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3",
			"parameters": map[string]any{"retry_after": 3}})
		return
	}
	c.status = 200
	chat := map[string]any{"id": c.chat, "type": "private"}
	switch method {
	case "getMe":
		ok200(w, map[string]any{"id": 1, "is_bot": true, "first_name": "Doc", "username": "docbot"})
	case "setWebhook", "deleteWebhook":
		a.hook = c
		ok200(w, true)
	case "getUpdates":
		if a.hook.text != "" {
			c.status = 409
			answer(w, 409, map[string]any{"ok": false, "error_code": 409,
				"description": "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
			return
		}
		for len(a.updates) > 0 && a.updates[0]["update_id"].(int) < p.Offset {
			a.updates = a.updates[1:]
		}
		ok200(w, a.updates)
	case "sendMessage":
		a.nextID++
		a.shown[a.nextID] = p.Text
		ok200(w, map[string]any{"message_id": a.nextID, "date": 1, "chat": chat, "text": p.Text})
	case "editMessageText":
		if a.shown[p.MessageID] == p.Text {
			c.status = 400
			answer(w, 400, map[string]any{"ok": false, "error_code": 400,
				"description": "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
			return
		}
		a.shown[p.MessageID] = p.Text
		ok200(w, map[string]any{"message_id": p.MessageID, "date": 1, "chat": chat, "text": p.Text})
	case "sendMessageDraft":
		if c.chat == 0 {
			c.status = 400
			answer(w, 400, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: chat not found"})
			return
		}
		ok200(w, true)
	case "sendChatAction", "deleteMessage":
		ok200(w, true)
	case "sendDocument", "sendPhoto":
		a.nextID++
		ok200(w, map[string]any{"message_id": a.nextID, "date": 1, "chat": chat})
	case "getFile":
		data, ok := a.files[p.FileID]
		if !ok {
			c.status = 400
			answer(w, 400, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"})
			return
		}
		ok200(w, map[string]any{"file_id": p.FileID, "file_unique_id": p.FileID, "file_size": len(data), "file_path": p.FileID})
	default:
		c.status = 404
		answer(w, 404, map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
	}
}

func ok200(w http.ResponseWriter, result any) {
	answer(w, 200, map[string]any{"ok": true, "result": result})
}

func answer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// say queues a person's message in chat for getUpdates: text, or a
// document with a caption.
func (a *docAPI) say(chat int64, text string, doc map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.updates = append(a.updates, update(100+len(a.updates)+len(a.calls), chat, text, doc))
}

// update is a person's message in chat as update id.
func update(id int, chat int64, text string, doc map[string]any) map[string]any {
	m := map[string]any{"message_id": id, "date": 1, "text": text,
		"from": map[string]any{"id": 7, "is_bot": false, "first_name": "Ann"}, "chat": map[string]any{"id": chat, "type": "private"}}
	if doc != nil {
		delete(m, "text")
		m["caption"], m["document"] = text, doc
	}
	return map[string]any{"update_id": id, "message": m}
}

// post delivers u as Telegram does to the webhook set: a POST of the
// update's JSON to its URL, with the header X-Telegram-Bot-Api-Secret-Token
// holding secret_token — here served by h in process, as the URL's host
// is the Connector's. It returns the answer's status: Telegram sends the
// update again after any but 2xx.
func (a *docAPI) post(t *testing.T, h http.Handler, u any, secret string) int {
	t.Helper()
	a.mu.Lock()
	hook := a.hook.text
	a.mu.Unlock()
	require.NotEmpty(t, hook, "no webhook set")
	body, err := json.Marshal(u)
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if secret != "" {
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// called returns the calls of method that succeeded (status 200), or all
// with status < 0.
func (a *docAPI) called(method string) []apiCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []apiCall
	for _, c := range a.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

func (a *docAPI) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, c := range a.calls {
		if c.method != "getUpdates" {
			fmt.Fprintf(&b, "%s %d %s chat=%d draft=%d %q file=%q\n", c.at.Format("05.000"), c.status, c.method, c.chat, c.draft, c.text, c.file)
		}
	}
	return b.String()
}
