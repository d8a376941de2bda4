package botapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// answer is a Bot API answer.
type answer struct {
	Ok          bool            `json:"ok"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Result      json.RawMessage `json:"result"`
}

// botCall makes one Bot API call through the proxy and decodes its answer.
func botCall(t *testing.T, srv *Server, method string, in map[string]any) (int, answer) {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(srv.API+"/bot"+Token+"/"+method, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var ans answer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatalf("%s: the answer is no Bot API JSON: %v", method, err)
	}
	return resp.StatusCode, ans
}

func start(t *testing.T, o Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o.Dir = "../.." // examples/telegram: its node_modules (npm ci)
	srv, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestServer_AnswersAsTheBotAPIDocuments runs the emulator behind the
// proxy and checks each answer the proxy gives where the emulator departs
// from the Bot API, and that Close leaves no goroutine.
func TestServer_AnswersAsTheBotAPIDocuments(t *testing.T) {
	defer goleak.VerifyNone(t)
	defer http.DefaultClient.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := start(t, Options{Typing: true})
	defer srv.Close()

	// getUpdates: an update stays until an offset confirms it; an empty
	// answer waits for the timeout.
	if err := srv.Say(ctx, 7, "hi"); err != nil {
		t.Fatal(err)
	}
	var updates []struct {
		UpdateID int `json:"update_id"`
	}
	for range 2 {
		_, ans := botCall(t, srv, "getUpdates", map[string]any{"offset": 0, "timeout": 1})
		if err := json.Unmarshal(ans.Result, &updates); err != nil || len(updates) != 1 {
			t.Fatalf("getUpdates before the offset confirms it: %s (%v), want the one update", ans.Result, err)
		}
	}
	start := time.Now()
	_, ans := botCall(t, srv, "getUpdates", map[string]any{"offset": updates[0].UpdateID + 1, "timeout": 1})
	if err := json.Unmarshal(ans.Result, &updates); err != nil || len(updates) != 0 {
		t.Fatalf("getUpdates after the offset confirmed it: %s (%v), want none", ans.Result, err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("an empty getUpdates with timeout 1 answered after %v, want about 1 s", waited)
	}
	if srv.Polls() != 3 {
		t.Fatalf("%d polls counted, want 3", srv.Polls())
	}

	// editMessageText answers the edited Message.
	_, ans = botCall(t, srv, "sendMessage", map[string]any{"chat_id": 7, "text": "first"})
	var sent struct {
		MessageID int `json:"message_id"`
	}
	if err := json.Unmarshal(ans.Result, &sent); err != nil || sent.MessageID == 0 {
		t.Fatalf("sendMessage: %s (%v)", ans.Result, err)
	}
	status, ans := botCall(t, srv, "editMessageText", map[string]any{"chat_id": 7, "message_id": sent.MessageID, "text": "second"})
	var edited struct {
		MessageID int    `json:"message_id"`
		Text      string `json:"text"`
		Chat      struct {
			ID int64 `json:"id"`
		} `json:"chat"`
	}
	if err := json.Unmarshal(ans.Result, &edited); err != nil || status != 200 || edited.MessageID != sent.MessageID || edited.Text != "second" || edited.Chat.ID != 7 {
		t.Fatalf("editMessageText: %d %s (%v), want the edited Message", status, ans.Result, err)
	}
	// An edit with no text is refused, and the text stays.
	if status, ans := botCall(t, srv, "editMessageText", map[string]any{"chat_id": 7, "message_id": sent.MessageID,
		"rich_message": map[string]any{"markdown": "third"}}); status != 400 || ans.Ok || ans.ErrorCode != 400 {
		t.Fatalf("editMessageText with no text: %d %+v, want 400", status, ans)
	}
	// A method the emulator lacks is 404, sendChatAction true (Typing).
	if status, ans := botCall(t, srv, "sendRichMessage", map[string]any{"chat_id": 7}); status != 404 || ans.Ok || ans.ErrorCode != 404 {
		t.Fatalf("sendRichMessage: %d %+v, want 404 Not Found", status, ans)
	}
	if status, ans := botCall(t, srv, "sendChatAction", map[string]any{"chat_id": 7, "action": "typing"}); status != 200 || !ans.Ok || string(ans.Result) != "true" {
		t.Fatalf("sendChatAction: %d %+v, want true", status, ans)
	}
	// The pairing note is neither shown nor recorded.
	if status, _ := botCall(t, srv, "sendMessage", map[string]any{"chat_id": 7, "text": Connected}); status != 200 {
		t.Fatalf("sendMessage %q: %d", Connected, status)
	}

	shown, err := srv.Shown(ctx)
	if err != nil || len(shown[7]) != 1 || shown[7][0].Text != "second" {
		t.Fatalf("chat 7 shows %v (%v), want the one message as edited", shown[7], err)
	}
	var got []string
	for _, c := range srv.Calls() {
		got = append(got, c.Method+" "+strconv.Itoa(c.Status))
	}
	want := []string{"sendMessage 200", "editMessageText 200", "editMessageText 400", "sendRichMessage 404", "sendChatAction 200"}
	if len(got) != len(want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("recorded %v, want %v", got, want)
		}
	}
}

// TestServer_NoTypingWebhookAndDoor: without Typing, sendChatAction is
// 404 as any method the emulator lacks; a webhook gets each update with
// the secret, twice with PostTwice; a closed door answers 429 and records
// nothing; a poll left waiting ends when Close comes.
func TestServer_NoTypingWebhookAndDoor(t *testing.T) {
	defer goleak.VerifyNone(t)
	defer http.DefaultClient.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := start(t, Options{})
	closed := false
	defer func() {
		if !closed {
			srv.Close()
		}
	}()
	if status, ans := botCall(t, srv, "sendChatAction", map[string]any{"chat_id": 7, "action": "typing"}); status != 404 || ans.ErrorCode != 404 {
		t.Fatalf("sendChatAction without Typing: %d %+v, want 404 Not Found", status, ans)
	}

	type post struct {
		secret string
		id     int
		text   string
	}
	posts := make(chan post, 10)
	hook := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u struct {
			UpdateID int `json:"update_id"`
			Message  struct {
				Text string `json:"text"`
			} `json:"message"`
		}
		_ = json.NewDecoder(r.Body).Decode(&u)
		posts <- post{r.Header.Get("X-Telegram-Bot-Api-Secret-Token"), u.UpdateID, u.Message.Text}
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hook.Addr = l.Addr().String()
	go func() { _ = hook.Serve(l) }()
	defer hook.Close()
	if status, _ := botCall(t, srv, "setWebhook", map[string]any{"url": "http://" + hook.Addr + "/u", "secret_token": "s3cret"}); status != 200 {
		t.Fatalf("setWebhook: %d", status)
	}
	if url, secret := srv.Webhook(); url != "http://"+hook.Addr+"/u" || secret != "s3cret" {
		t.Fatalf("webhook %q %q", url, secret)
	}
	srv.PostTwice()
	if err := srv.Say(ctx, 7, "one"); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		select {
		case p := <-posts:
			if p != (post{"s3cret", 1000, "one"}) {
				t.Fatalf("posted %+v, want update 1000 \"one\" with the secret, twice", p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d posts of the update, want 2", k)
		}
	}

	open, err := srv.CloseDoor(ctx, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	before := len(srv.Calls())
	if status, ans := botCall(t, srv, "sendMessage", map[string]any{"chat_id": 7, "text": "x"}); status != 429 || ans.ErrorCode != 429 {
		t.Fatalf("sendMessage behind the closed door: %d %+v, want 429", status, ans)
	}
	if len(srv.Calls()) != before {
		t.Fatalf("a refused call was recorded: %v", srv.Calls())
	}
	open()
	if status, _ := botCall(t, srv, "sendMessage", map[string]any{"chat_id": 7, "text": "x"}); status != 200 {
		t.Fatalf("sendMessage after open: %d", status)
	}

	// A long poll ends when Close comes, well before its timeout.
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(srv.API+"/bot"+Token+"/getUpdates", "application/json", bytes.NewReader([]byte(`{"offset":99999,"timeout":2}`)))
		if err == nil {
			resp.Body.Close()
		}
	}()
	for srv.Polls() == 0 {
		time.Sleep(time.Millisecond)
	}
	began := time.Now()
	srv.Close()
	closed = true
	if took := time.Since(began); took > time.Second {
		t.Fatalf("Close took %v with a poll waiting, want it to end the poll", took)
	}
	<-done
}

// TestStart_SaysWhyTheEmulatorDidNotStart: with no telegram-test-api in
// Dir, Start fails with node's own words and leaves nothing running.
func TestStart_SaysWhyTheEmulatorDidNotStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	_, err := Start(context.Background(), Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "Cannot find module 'telegram-test-api'") {
		t.Fatalf("Start without the emulator: %v, want node's error", err)
	}
}
