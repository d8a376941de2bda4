//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// botCall makes one Bot API call through the proxy and decodes its answer.
func botCall(t *testing.T, srv *server, method string, in map[string]any) (status int, ans struct {
	Ok          bool            `json:"ok"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Result      json.RawMessage `json:"result"`
}) {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(srv.api+"/bot"+token+"/"+method, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatalf("%s: the answer is no Bot API JSON: %v", method, err)
	}
	return resp.StatusCode, ans
}

// TestServer_AnswersAsTheBotAPIDocuments runs the emulator behind the
// proxy and checks each answer the proxy gives where the emulator departs
// from the Bot API, the same for both sides of the benchmark.
func TestServer_AnswersAsTheBotAPIDocuments(t *testing.T) {
	defer goleak.VerifyNone(t)
	defer http.DefaultClient.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := startServer(ctx, "..") // examples/telegram: its node_modules (npm ci)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()

	// getUpdates: an update stays until an offset confirms it; an empty
	// answer waits for the timeout.
	if err := srv.say(7, "hi"); err != nil {
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
	// A method the emulator lacks is 404, sendChatAction true.
	if status, ans := botCall(t, srv, "sendRichMessage", map[string]any{"chat_id": 7}); status != 404 || ans.Ok || ans.ErrorCode != 404 {
		t.Fatalf("sendRichMessage: %d %+v, want 404 Not Found", status, ans)
	}
	if status, ans := botCall(t, srv, "sendChatAction", map[string]any{"chat_id": 7, "action": "typing"}); status != 200 || !ans.Ok || string(ans.Result) != "true" {
		t.Fatalf("sendChatAction: %d %+v, want true", status, ans)
	}

	shown, err := srv.shown()
	if err != nil || len(shown[7]) != 1 || shown[7][0] != "second" {
		t.Fatalf("chat 7 shows %q (%v), want the one message as edited", shown[7], err)
	}
	var got []string
	for _, c := range srv.recorded() {
		got = append(got, c.method+" "+itoa(int64(c.status)))
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
