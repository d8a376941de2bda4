package display_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
)

var (
	thinking = imv2.ChatActivity{Status: imv2.ActivityThinking}
	tool     = imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "web_search"}
	idle     = imv2.ChatActivity{Status: imv2.ActivityIdle}
)

// typingLog renders typing calls as "on@4s" / "off@30s".
func typingLog(r *rec) []string {
	var out []string
	for _, c := range r.all("typing") {
		s := "off"
		if c.On {
			s = "on"
		}
		out = append(out, s+"@"+c.At.String())
	}
	return out
}

// Thinking shows typing at once, refreshes it every 4 s and drops it at the
// 30 s local timeout.
func TestTyping_C5_C7_ShownRefreshedThenTimedOut(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := newTarget(t, caps{mode: display.Buffer, typing: true}, display.Options{})
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	require.Equal(t, []string{"on@0s"}, typingLog(r))
	clk.Advance(4 * time.Second)
	require.Equal(t, []string{"on@0s", "on@4s"}, typingLog(r))
	clk.Advance(time.Minute)
	require.Equal(t, []string{"on@0s", "on@4s", "on@8s", "on@12s", "on@16s", "on@20s", "on@24s", "on@28s", "off@30s"}, typingLog(r))
	require.Zero(t, clk.Pending(), "nothing runs after the timeout")

	// A later snapshot shows it again.
	require.NoError(t, tg.SetActivity(ctx, "ch", tool))
	require.Equal(t, "on@1m4s", typingLog(r)[9])
}

// Each snapshot replaces the last: the same snapshot again only extends the
// timeout, without an extra call; intervals are configurable.
func TestTyping_C7_SnapshotExtendsTimeout(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := newTarget(t, caps{mode: display.Buffer, typing: true},
		display.Options{TypingRefresh: 8 * time.Second, ActivityTimeout: 10 * time.Second})
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	clk.Advance(6 * time.Second)
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking)) // deadline 16 s
	clk.Advance(time.Minute)
	require.Equal(t, []string{"on@0s", "on@8s", "off@16s"}, typingLog(r))
}

// statusLog renders typing calls as "thinking@0s" / "tool:web_search@4s" /
// "idle@30s".
func statusLog(r *rec) []string {
	var out []string
	for _, c := range r.all("typing") {
		s := c.Status
		if c.Tool != "" {
			s += ":" + c.Tool
		}
		out = append(out, s+"@"+c.At.String())
	}
	return out
}

// The Typer sees the status and the tool name (C5): a snapshot that
// changes either is shown at once, refreshes repeat the latest one, and
// clearing passes idle (C6, C7).
func TestTyping_C5_C7_StatusAndToolNameReachTheTyper(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := newTarget(t, caps{mode: display.Buffer, typing: true},
		display.Options{TypingRefresh: 4 * time.Second, ActivityTimeout: 10 * time.Second})
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	clk.Advance(5 * time.Second)
	require.NoError(t, tg.SetActivity(ctx, "ch", tool)) // shown at once; deadline 15 s
	clk.Advance(time.Second)
	require.NoError(t, tg.SetActivity(ctx, "ch", imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "calculator"}))
	require.NoError(t, tg.SetActivity(ctx, "ch", imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "calculator"})) // same: no call
	clk.Advance(time.Minute)
	require.Equal(t, []string{"thinking@0s", "thinking@4s", "tool:web_search@5s", "tool:calculator@6s",
		"tool:calculator@8s", "tool:calculator@12s", "idle@16s"}, statusLog(r))

	// Idle and the final clear with idle too.
	require.NoError(t, tg.SetActivity(ctx, "ch", tool))
	require.NoError(t, tg.SetActivity(ctx, "ch", idle))
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "answer", 0)))
	require.Equal(t, []string{"tool:web_search@1m6s", "idle@1m6s", "thinking@1m6s", "idle@1m6s"}, statusLog(r)[7:])
}

// Idle clears typing and stops the refresh (C6).
func TestTyping_C6_ClearedOnIdle(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := newTarget(t, caps{mode: display.Buffer, typing: true}, display.Options{})
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	clk.Advance(5 * time.Second)
	require.NoError(t, tg.SetActivity(ctx, "ch", idle))
	require.NoError(t, tg.SetActivity(ctx, "ch", idle)) // idle again: nothing to clear
	clk.Advance(time.Minute)
	require.Equal(t, []string{"on@0s", "on@4s", "off@5s"}, typingLog(r))
	require.Zero(t, clk.Pending())
}

// The final clears typing, after the final is accepted so that typing never
// shows under the answer; refreshes stop before it goes out (C6).
func TestTyping_C6_ClearedOnFinal(t *testing.T) {
	ctx := context.Background()
	tg, r, clk := newTarget(t, caps{mode: display.Buffer, typing: true}, display.Options{})
	require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
	require.NoError(t, tg.SetActivity(ctx, "other", thinking))
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "answer", 0)))
	clk.Advance(time.Second)
	var got []string
	for _, c := range r.all() {
		got = append(got, c.Op+":"+c.Channel)
	}
	require.Equal(t, []string{"typing:ch", "typing:other", "send:ch", "typing:ch"}, got)
	require.False(t, r.all()[3].On)
}

// The first displayed delta text clears typing in modes that display it;
// Buffer displays nothing, so typing lasts until the final (C6).
func TestTyping_C6_ClearedOnFirstDisplayedDelta(t *testing.T) {
	for _, mode := range []display.Mode{display.Stream, display.Edit, display.Buffer} {
		t.Run(modeName[mode], func(t *testing.T) {
			ctx := context.Background()
			tg, r, clk := newTarget(t, caps{mode: mode, typing: true}, display.Options{})
			require.NoError(t, tg.SetActivity(ctx, "ch", thinking))
			requireDraft(t, tg, tg.UpdateDraft(ctx, "ch", "m1", "Hel"))
			clk.Advance(time.Second)
			requireDraft(t, tg, tg.UpdateDraft(ctx, "ch", "m1", "Hello"))
			clk.Advance(time.Second)
			var got []string
			for _, c := range r.all() {
				if c.Op == "typing" && !c.On {
					c.Op = "typing-off"
				}
				got = append(got, c.Op)
			}
			switch mode {
			case display.Stream:
				require.Equal(t, []string{"typing", "draft", "typing-off", "draft"}, got)
			case display.Edit:
				require.Equal(t, []string{"typing", "post", "typing-off", "edit"}, got)
			case display.Buffer:
				require.Equal(t, []string{"typing"}, got)
				require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "Hello", 0)))
				require.Equal(t, "typing:off@2s", "typing:"+typingLog(r)[1])
			}
		})
	}
}

// A failing Typer never fails a message: PostMessage and UpdateDraft
// succeed, the failures are logged, and the message is sent once (C8).
func TestTyping_C8_TyperErrorNeverFailsMessage(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	tg, r, clk := newTarget(t, caps{mode: display.Edit, typing: true},
		display.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	boom := errors.New("typing endpoint down")
	r.fail("typing", boom)

	require.ErrorIs(t, tg.SetActivity(ctx, "ch", thinking), boom) // for the Channel's log
	clk.Advance(4 * time.Second)                                  // refresh fails: logged
	requireDraft(t, tg, tg.UpdateDraft(ctx, "ch", "m1", "a"))     // first delta clears: fails, logged
	require.ErrorIs(t, tg.SetActivity(ctx, "ch", thinking), boom)
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m1", "ab", 0))) // clearing fails: logged
	require.ErrorIs(t, tg.SetActivity(ctx, "ch", thinking), boom)
	require.NoError(t, tg.PostMessage(ctx, "ch", msg("m2", "cd", 0)))

	require.Equal(t, []string{"post:a", "finish:ab", "send:cd"}, opsText(r.all("post", "edit", "finish", "send")))
	require.Contains(t, logs.String(), "refreshing typing failed")
	require.Contains(t, logs.String(), "clearing typing failed")
}

// An unknown status is refused without a call; typing state is capped.
func TestTyping_C2_InvalidStatusAndCap(t *testing.T) {
	ctx := context.Background()
	tg, r, _ := newTarget(t, caps{mode: display.Buffer, typing: true}, display.Options{MaxTyping: 1})
	require.Error(t, tg.SetActivity(ctx, "ch", imv2.ChatActivity{Status: "dreaming"}))
	require.Zero(t, r.count())

	require.NoError(t, tg.SetActivity(ctx, "c1", thinking))
	require.ErrorIs(t, tg.SetActivity(ctx, "c2", thinking), display.ErrFull)
	require.NoError(t, tg.SetActivity(ctx, "c1", tool)) // an existing one is still updated, and shown
	require.NoError(t, tg.SetActivity(ctx, "c1", idle))
	require.NoError(t, tg.SetActivity(ctx, "c2", thinking))
	var chans []string
	for _, c := range r.all() {
		chans = append(chans, c.Channel)
	}
	require.Equal(t, []string{"c1", "c1", "c1", "c2"}, chans) // thinking, tool, idle; then c2
}
