//go:build unix

package main

import (
	"testing"
	"time"

	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
)

// TestScore_CountsEachWayAChatCanGoWrong feeds score what a broken bridge
// leaves: a reply twice, one out of order, one missing, a placeholder.
func TestScore_CountsEachWayAChatCanGoWrong(t *testing.T) {
	want := func(ch int64) []string { return []string{"a", "b", "c"} }
	shown := map[int64][]string{
		1: {"a", "b", "c"},      // right
		2: {"a", "a", "b", "c"}, // a twice
		3: {"b", "a", "c"},      // a after b
		4: {"a", "...", "c"},    // b missing, a placeholder left
	}
	var r result
	r.score([]int64{1, 2, 3, 4}, want, shown)
	got := [6]int{r.want, r.shownOnce, r.twice, r.outOfOrder, r.missing, r.others}
	if wantN := [6]int{12, 3 + 3 + 2 + 2, 1, 1, 1, 1}; got != wantN {
		t.Fatalf("want, once, twice, out of order, missing, others = %v, want %v", got, wantN)
	}
}

// TestCount_PacingFiguresFromTheRecord: two calls to a chat 400 ms apart
// are one under the pace; the bot's busiest second is counted across
// chats; refused calls and other methods are counted apart.
func TestCount_PacingFiguresFromTheRecord(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	calls := []botapitest.Call{
		{Method: "sendMessage", Chat: 1, Status: 200, At: at(0)},
		{Method: "editMessageText", Chat: 1, Status: 200, At: at(1000)},
		{Method: "editMessageText", Chat: 1, Status: 200, At: at(1400)}, // 400 ms after the last
		{Method: "sendMessage", Chat: 2, Status: 200, At: at(1100)},
		{Method: "editMessageText", Chat: 2, Status: 429, At: at(2500)},
		{Method: "sendChatAction", Chat: 2, Status: 200, At: at(1200)},
	}
	var r result
	r.count(calls, 2)
	if r.sends != 2 || r.edits != 3 || r.refused != 1 || r.otherCalls["sendChatAction"] != 1 {
		t.Fatalf("sends %d edits %d refused %d other %v", r.sends, r.edits, r.refused, r.otherCalls)
	}
	if r.minGap != 400*time.Millisecond || r.underPace != 1 {
		t.Fatalf("shortest gap %v, under the pace %d; want 400ms, 1", r.minGap, r.underPace)
	}
	if r.perBotMax != 3 { // 1000, 1100, 1400
		t.Fatalf("busiest second of the bot %d, want 3", r.perBotMax)
	}
	if r.perReply != 2.5 || r.editsPerReply != 1.5 {
		t.Fatalf("per reply %v, edits per reply %v; want 2.5, 1.5", r.perReply, r.editsPerReply)
	}
}
